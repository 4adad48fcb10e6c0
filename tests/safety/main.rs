//! Two leaders, looked for on purpose: the leader's link to Redis blackholed, slowed and reset
//! through a real fault proxy, the faults the lease's own model did not try, the chaos harness's
//! short run with its negative control, and fencing against real PostgreSQL, Redis, HTTP and
//! Kubernetes resources; and one partly sick replica (a slow link, a refused permission) that
//! must not cost the group its leader.

mod beyond_the_model;
mod clock;
mod clock_overlap;
mod clock_steps;
mod faults;
mod fence;
mod gray;
mod late_win;
mod short_chaos;
mod unseen_pause;
