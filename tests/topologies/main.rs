//! leasehold against the Redis deployments people run: Sentinel (and how many Sentinels a URL
//! stands for), Cluster, TLS and mutual TLS, an ACL user with least privilege, a password
//! rotated while leasehold runs, and a Redis that answers but cannot hold the lease (a replica,
//! scripting renamed away, on Redis 7.0, 6.2 and Valkey), each as real redis-server processes.

mod acl;
mod acl_passwords;
mod acl_topologies;
mod cluster;
mod password_rotation;
mod refusals;
mod sentinel;
mod sentinel_count;
mod sentinel_gray;
mod tls;
