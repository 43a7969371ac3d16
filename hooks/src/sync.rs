//! The sync hook: desired children and status of a running cluster.
//!
//! The pipeline is `validate -> resolve -> plan -> build -> status`. Nothing here
//! reads the clock or any entropy: both arrive in [`Context`](crate::Context).

use k8s_openapi::{api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{
    Context,
    api::{MySQLStatus, Phase},
    bootstrap::{self, Bootstrap},
    build::{config, pdb, service, statefulset},
    conditions::Conditions,
    error::{Error, Result},
    metacontroller::{ByKey, Child, SyncRequest, SyncResponse},
    model::{Cluster, Problem},
    observed::Observed,
};

/// How often to look again while something is in flight.
const RESYNC_BUSY_SECONDS: u32 = 10;

/// Answers a sync call.
///
/// # Errors
/// [`Error::InvalidRequest`] when the parent lacks the identity every child is
/// derived from (name, namespace, uid).
pub fn sync(request: &SyncRequest, ctx: &Context) -> Result<SyncResponse> {
    validate(request)?;
    let names = crate::names::Names::new(request.parent.metadata.name.as_deref().unwrap_or_default());
    let observed = Observed::new(request, &names);
    let (cluster, problems) = Cluster::resolve(&request.parent, &observed);
    let previous = request.parent.status.clone().unwrap_or_default();
    let bootstrap = bootstrap::plan(&cluster, &observed, &previous.conditions);

    let mut children = desired_children(&cluster, &observed, ctx);
    if let Some(job) = bootstrap.job() {
        children.push(Child::Job(Box::new(job.clone())));
    }
    children.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));

    let status = status(&cluster, &observed, &previous, &bootstrap, &problems, ctx);
    let busy = status.phase != Some(Phase::Running) || matches!(bootstrap, Bootstrap::Running(_));
    Ok(SyncResponse { status, children, resync_after_seconds: busy.then_some(RESYNC_BUSY_SECONDS) })
}

/// The request must name the parent completely: every child name and the
/// generated passwords derive from it.
pub(crate) fn validate(request: &SyncRequest) -> Result<()> {
    let m = &request.parent.metadata;
    for (field, value) in [("name", &m.name), ("namespace", &m.namespace), ("uid", &m.uid)] {
        if value.as_deref().is_none_or(str::is_empty) {
            return Err(Error::InvalidRequest(format!("parent.metadata.{field} is missing")));
        }
    }
    let (c, r) = (&request.children, &request.related);
    keyed_by_name("StatefulSet", &c.stateful_sets)?;
    keyed_by_name("Service", &c.services)?;
    keyed_by_name("ConfigMap", &c.config_maps)?;
    keyed_by_name("Secret", &c.secrets)?;
    keyed_by_name("PodDisruptionBudget", &c.pod_disruption_budgets)?;
    keyed_by_name("EndpointSlice", &c.endpoint_slices)?;
    keyed_by_name("Job", &c.jobs)?;
    keyed_by_name("Pod", &r.pods)?;
    let names = crate::names::Names::new(m.name.as_deref().unwrap_or_default());
    ours("StatefulSet", &c.stateful_sets, &[&names.stateful_set])?;
    ours("ConfigMap", &c.config_maps, &[&names.config])?;
    ours("Secret", &c.secrets, &[&names.credentials])?;
    Ok(())
}

/// Every observed StatefulSet, ConfigMap and Secret bears a name this `MySQL`
/// gives its children. Any other would be left out of the answer, and so deleted
/// (a StatefulSet with the cluster's data); Metacontroller never sends one for a
/// parent whose name cannot change, so such a request is refused, not obeyed.
fn ours<T>(kind: &str, objects: &ByKey<T>, names: &[&str]) -> Result<()>
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    for object in objects.values() {
        let name = object.metadata().name.as_deref().unwrap_or_default();
        if !names.contains(&name) {
            return Err(Error::InvalidRequest(format!(
                "observed {kind} {name:?} is not a child of this MySQL by name; refusing rather than deleting it"
            )));
        }
    }
    Ok(())
}

/// Every observed object has a name and sits under the key Metacontroller gives it
/// (`namespace/name`). Children are found by name: one without a name (or under a
/// key that disagrees with it) would be invisible to the hook and so left out of
/// the answer, which deletes it, or, for the credentials Secret, replaced by
/// freshly derived passwords. Metacontroller never sends such a request: refuse it.
fn keyed_by_name<T>(kind: &str, objects: &ByKey<T>) -> Result<()>
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    for (key, object) in objects {
        let meta = object.metadata();
        let name = meta.name.as_deref().unwrap_or_default();
        let expected = match meta.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_owned(),
        };
        if name.is_empty() || *key != expected {
            return Err(Error::InvalidRequest(format!(
                "observed {kind} under key {key:?} has metadata name {name:?}: not a request Metacontroller sends"
            )));
        }
    }
    Ok(())
}

/// The children every live cluster has.
fn desired_children(c: &Cluster, observed: &Observed<'_>, ctx: &Context) -> Vec<Child> {
    let mut children = vec![
        Child::StatefulSet(Box::new(statefulset::build(c, 0))),
        Child::Service(Box::new(service::headless(c))),
        Child::Service(Box::new(service::primary(c))),
        Child::Service(Box::new(service::replicas(c))),
        Child::ConfigMap(Box::new(config::config_map(c))),
        Child::PodDisruptionBudget(Box::new(pdb::build(c))),
    ];
    children.extend(service::replica_endpoints(c, observed).into_iter().map(|s| Child::EndpointSlice(Box::new(s))));
    if c.owns_credentials {
        let secret: Secret = config::secret(c, observed.secret_data(&c.names.credentials), &ctx.secret_seed);
        children.push(Child::Secret(Box::new(secret)));
    }
    children
}

fn status(
    c: &Cluster,
    observed: &Observed<'_>,
    previous: &MySQLStatus,
    bootstrap: &Bootstrap,
    problems: &[Problem],
    ctx: &Context,
) -> MySQLStatus {
    let members: Vec<_> = observed.members.values().filter(|m| m.ordinal < c.replicas).collect();
    let ready = i32::try_from(members.iter().filter(|m| m.ready).count()).unwrap_or(i32::MAX);
    let primary_ready = observed.member(&c.primary).is_some_and(|m| m.ready);
    let phase = if observed.stateful_set.is_none() {
        Phase::Pending
    } else if !bootstrap.initialized() {
        Phase::Initializing
    } else if !primary_ready {
        Phase::Failed
    } else if ready == c.replicas {
        Phase::Running
    } else {
        Phase::Degraded
    };

    let mut conditions = Conditions::new(&previous.conditions, ctx.now);
    let (reason, message) = match phase {
        Phase::Pending => ("Creating", "creating the StatefulSet".to_owned()),
        Phase::Initializing => {
            ("Initializing", format!("{ready}/{} servers Ready; bootstrapping {}", c.replicas, c.primary))
        }
        Phase::Running => ("Running", format!("{ready}/{} servers Ready; primary {}", c.replicas, c.primary)),
        Phase::Degraded => ("Degraded", format!("{ready}/{} servers Ready; primary {} serves", c.replicas, c.primary)),
        Phase::Failed | Phase::Deleting => ("PrimaryNotReady", format!("primary {} is not Ready", c.primary)),
    };
    conditions.set("Ready", phase == Phase::Running, reason, message);
    match bootstrap {
        Bootstrap::Done => conditions.set(
            bootstrap::INITIALIZED,
            true,
            "Bootstrapped",
            format!("{} was bootstrapped as the first primary", c.primary),
        ),
        Bootstrap::Succeeded(_, result) => conditions.set(
            bootstrap::INITIALIZED,
            true,
            "Bootstrapped",
            format!("{} was bootstrapped as the first primary: {result}", c.primary),
        ),
        Bootstrap::WaitingForPrimary => conditions.set(
            bootstrap::INITIALIZED,
            false,
            "WaitingForPrimary",
            format!("waiting for {} to be Ready", c.primary),
        ),
        Bootstrap::Running(_) => conditions.set(
            bootstrap::INITIALIZED,
            false,
            "Bootstrapping",
            format!("the bootstrap Job is making {} the writable primary", c.primary),
        ),
        Bootstrap::Failed(job, result) => conditions.set(
            bootstrap::INITIALIZED,
            false,
            "BootstrapFailed",
            format!(
                "Job {} failed{}; delete the Job to retry",
                job.metadata.name.as_deref().unwrap_or_default(),
                if result.is_empty() { String::new() } else { format!(": {result}") }
            ),
        ),
    }
    if problems.is_empty() {
        conditions.set("SpecAccepted", true, "Accepted", "the spec is applied");
    } else {
        let message = problems.iter().map(|p| p.message.as_str()).collect::<Vec<_>>().join("; ");
        conditions.set("SpecAccepted", false, problems[0].reason, message);
    }
    if c.replicas > 1 {
        conditions.set(
            "SemiSyncProtected",
            true,
            "ReplicaAcknowledges",
            "a commit returns only after a replica has received it (lossless semi-synchronous replication)",
        );
    } else {
        conditions.set(
            "SemiSyncProtected",
            false,
            "SingleServer",
            "with one server no replica acknowledges commits: losing its volume loses data, and there is no failover",
        );
    }

    MySQLStatus {
        phase: Some(phase),
        primary: Some(c.primary.clone()),
        replicas: i32::try_from(members.len()).unwrap_or(i32::MAX),
        ready_replicas: ready,
        observed_generation: previous.observed_generation,
        conditions: conditions.finish(),
    }
}
