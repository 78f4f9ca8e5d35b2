//! A real, loopback Kubernetes control plane (etcd, kube-apiserver, optionally
//! kube-controller-manager) for tests and the local demo.
