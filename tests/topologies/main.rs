//! leasehold against the Redis deployments people run: Sentinel (and how many Sentinels a URL
//! stands for), Cluster, TLS and mutual TLS, and an ACL user with least privilege, each as real
//! redis-server processes.

mod acl;
mod cluster;
mod sentinel;
mod sentinel_count;
mod tls;
