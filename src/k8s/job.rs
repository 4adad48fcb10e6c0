//! Finds what a one-shot lock in a Job's pod is named after: the CronJob that owns the Job (pod
//! → Job → CronJob), else the Job itself. Both come from owner references, so the only reads
//! are this pod and its Job.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::{Client, ResourceExt};

use super::K8sError;
use super::discover::{controller_of, get};

/// The workload a Job's pod belongs to, for naming its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwningJob {
    /// The Job was made by this CronJob: every run of the schedule shares one lock.
    CronJob(String),
    /// A Job of its own.
    Job(String),
}

impl OwningJob {
    /// The lease name: `<namespace>/cronjob/<name>` or `<namespace>/job/<name>`, so that a
    /// CronJob's lock never shares a lease with a Deployment of the same name.
    pub fn lease_name(&self, namespace: &str) -> String {
        match self {
            OwningJob::CronJob(name) => format!("{namespace}/cronjob/{name}"),
            OwningJob::Job(name) => format!("{namespace}/job/{name}"),
        }
    }
}

/// Follows `pod`'s controller owners to its Job, and the Job's to its CronJob.
pub async fn owning_job(
    client: &Client,
    namespace: &str,
    pod: &str,
) -> Result<OwningJob, K8sError> {
    let this: Pod = get(client, namespace, pod).await?;
    let job_ref =
        controller_of(this.owner_references(), "Job").ok_or_else(|| K8sError::NotAJob {
            pod: format!("{namespace}/{pod}"),
        })?;
    let job: Job = get(client, namespace, &job_ref.name).await?;
    Ok(match controller_of(job.owner_references(), "CronJob") {
        Some(cron) => OwningJob::CronJob(cron.name.clone()),
        None => OwningJob::Job(job.name_any()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_are_named_after_the_cronjob_or_the_job() {
        let cases = [
            (OwningJob::CronJob("report".into()), "batch/cronjob/report"),
            (OwningJob::Job("migrate-7".into()), "batch/job/migrate-7"),
        ];
        for (owner, want) in cases {
            assert_eq!(owner.lease_name("batch"), want, "{owner:?}");
        }
    }
}
