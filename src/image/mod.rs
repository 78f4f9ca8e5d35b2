//! OCI images: pulling by digest, streaming blobs to disk, safe unpacking and the
//! digest-keyed cache shared by catalogs and bundles.
