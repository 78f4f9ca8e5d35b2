//! registry+v1 bundles: loading from a directory or an unpacked image, validation,
//! and rendering into the Kubernetes objects to apply (reference §5).
