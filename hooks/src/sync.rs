//! The sync hook: desired children and status of a running cluster.
//!
//! The pipeline is `validate -> resolve -> plan -> build -> status`. Nothing here
//! reads the clock or any entropy: both arrive in [`Context`](crate::Context).

use k8s_openapi::{
    api::core::v1::{Pod, Secret},
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta},
};

use crate::{
    Context, Timestamp, access,
    api::{BackupPhase, MySQLBackup, MySQLStatus, Phase},
    backups,
    bootstrap::{self, Bootstrap},
    build::{config, network, pdb, service, statefulset},
    conditions::Conditions,
    error::{Error, Result},
    memory,
    metacontroller::{ByKey, Child, SyncRequest, SyncResponse},
    model::{Cluster, Problem},
    observed::Observed,
    restore::{self, Restore},
    roles::{self, Roles},
    rollout, servers, users,
};

/// How often to look again while something is in flight.
const RESYNC_BUSY_SECONDS: u32 = 10;

/// Answers a sync call.
///
/// # Errors
/// [`Error::InvalidRequest`] when the parent lacks the identity every child is
/// derived from (name, namespace, uid).
pub fn sync(request: &SyncRequest, ctx: &Context) -> Result<SyncResponse> {
    sync_with_roles(request, ctx, !request.finalizing)
}

/// A sync answer; `may_start_roles`: whether a role change may start. Finalize
/// uses it for every child as a sync would answer (an error is passed on, never
/// turned into an empty list: finalizing with no children would delete them all):
/// running role changes go on, and with `may_start_roles` a failover or a drain's
/// switchover may start too (the final backup needs a writable primary), never a
/// requested or a rollout's switchover.
///
/// # Errors
/// As [`sync`].
pub(crate) fn sync_with_roles(request: &SyncRequest, ctx: &Context, may_start_roles: bool) -> Result<SyncResponse> {
    validate(request)?;
    let names = crate::names::Names::new(request.parent.metadata.name.as_deref().unwrap_or_default());
    let observed = Observed::new(request, &names);
    // What the hook must remember comes back from status, the ConfigMap and the
    // Jobs alike: a lost or stale status never bootstraps again or moves the primary.
    let memory = memory::recall(&request.parent, &observed, &names);
    let (mut cluster, mut problems) = access::resolve(
        &request.parent,
        &observed,
        ctx,
        memory.primary.as_ref().map(|p| p.pod.as_str()),
        memory.newest_version,
    );
    let previous = request.parent.status.clone().unwrap_or_default();
    let pods: Vec<&Pod> = request.related.pods.values().collect();
    let related_backups: Vec<&MySQLBackup> = request.related.mysql_backups.values().collect();
    let gate = access::Gate {
        namespace: &cluster.namespace,
        cluster: &cluster.names.cluster,
        secrets: &request.related.secrets,
        service_accounts: &request.related.service_accounts,
        claims: &request.related.claims,
        allowed_images: &ctx.allowed_images,
    };
    let restore = restore::plan(&restore::Facts {
        parent: &request.parent,
        cluster: &cluster,
        observed: &observed,
        backups: &related_backups,
        pods: &pods,
        previous: &previous,
        initialized: memory.initialized,
        gate: &gate,
    });
    problems.extend(restore.ignored.clone());
    // Scheduled backups only to a store this cluster may use.
    let backup_refused = backups::settings(&request.parent)
        .and_then(|(spec, storage)| gate.storage(&storage, spec.signing_key.as_ref()).err());
    let bootstrap = if restore.blocks_bootstrap {
        Bootstrap::WaitingForRestore
    } else {
        let retained = bootstrap::retained_not_started(
            &cluster,
            &observed,
            request.related.claims.values(),
            request.parent.metadata.creation_timestamp.as_ref(),
        );
        bootstrap::plan(
            &cluster,
            &observed,
            memory.initialized,
            crate::conditions::is_true(&previous.conditions, bootstrap::INITIALIZED),
            &retained,
        )
    };
    // The bootstrap Job chose the first primary (the most advanced server).
    if let Some(chosen) = bootstrap.chosen() {
        cluster.primary = chosen.to_owned();
    }
    // Restores run only before bootstrap, role changes and rollouts only after it:
    // they never overlap.
    let initialized = matches!(bootstrap, Bootstrap::Done(_));
    let restoring = restore.running(&observed);
    // Built once: the rollout compares it, the StatefulSet carries it and
    // `TemplateApplied` checks it (it depends on the spec, never on the primary).
    let template = statefulset::template(&cluster);
    let rollout = rollout::plan(&rollout::Facts {
        cluster: &cluster,
        observed: &observed,
        previous: &previous,
        initialized,
        restoring,
        template: &template,
        now: ctx.now,
    });
    let annotation =
        |key: &str| request.parent.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str);
    // The epoch of the primary as this sync finds it.
    let primary_epoch = memory.primary.as_ref().filter(|p| p.pod == cluster.primary).map_or(0, |p| p.epoch);
    // A scale-down keeps the old failover arithmetic until it is proven safe.
    let scale_down = crate::scale_down::plan(
        &cluster,
        &observed,
        crate::scale_down::held(&cluster, &observed, memory.quorum_servers, initialized),
        primary_epoch,
        ctx.now,
    );
    // What the primary is known to have executed (issue 31.3): a failover started
    // now gives it to its Job.
    let known = roles::position::remember(
        cluster.flavor,
        memory.primary_position.as_ref(),
        &cluster.primary,
        primary_epoch,
        servers::primary_gtid(&observed, &cluster.primary).as_deref(),
    );
    let roles = roles::plan(&roles::Input {
        cluster: &cluster,
        observed: &observed,
        previous: &previous,
        failover: &request.parent.spec.failover,
        switchover_to: annotation(roles::SWITCHOVER_TO).filter(|_| !request.finalizing),
        force_failover: annotation(roles::FORCE_FAILOVER),
        memory: &memory,
        rollout_switchover_to: rollout.switchover_to.as_deref().filter(|_| !request.finalizing),
        initialized,
        bootstrapped_at: bootstrap
            .job()
            .and_then(|j| observed.job(j.metadata.name.as_deref()?))
            .and_then(|j| j.status.as_ref()?.completion_time.as_ref())
            .map(|t| t.0),
        may_start: may_start_roles,
        quorum_servers: scale_down.servers,
        primary_position: known.as_ref().filter(|_| initialized),
        now: ctx.now,
    });
    // Everything below (Services, ConfigMap, EndpointSlices) follows the primary
    // as this sync leaves it.
    cluster.primary.clone_from(&roles.primary);

    let remembered = Remembered {
        initialized: bootstrap.initialized(),
        epoch: roles.epoch,
        operations_started: roles.operations_started,
        newest_version: memory.newest_version.map(|v| v.to_string()),
        force_failover_used: roles.force_failover_used.clone(),
        quorum_servers: scale_down.remember,
        // Kept for the primary and epoch it was read for; a role change forgets it.
        primary_position: known.filter(|k| initialized && k.pod == roles.primary && k.epoch == roles.epoch),
    };
    let template_hash = statefulset::template_hash(&template).unwrap_or_default().to_owned();
    let mut children = desired_children(&cluster, &observed, rollout.partition, template, &remembered, ctx);
    // The bootstrap Job stays the record of the first primary until a role change.
    let bootstrap_job = bootstrap.job().filter(|_| !matches!(bootstrap, Bootstrap::Done(_)) || roles.epoch == 0);
    children.extend(
        bootstrap_job.into_iter().chain(roles.job.as_ref()).chain(&roles.kept).map(|j| Child::Job(Box::new(j.clone()))),
    );
    children.extend(restore.jobs.iter().map(|j| Child::Job(Box::new(j.clone()))));
    children.extend(scale_down.job.iter().map(|j| Child::Job(Box::new(j.clone()))));
    // status.servers, and the Job that inspects the servers when what is observed changes.
    let servers = servers::plan(&cluster, &observed, initialized);
    children.extend(servers.jobs.into_iter().map(|j| Child::Job(Box::new(j))));
    let users = users::plan(
        &request.parent,
        &cluster,
        &observed,
        &request.related.secrets,
        bootstrap.initialized(),
        &ctx.entropy,
    );
    children.extend(users.secrets.iter().map(|s| Child::Secret(Box::new(s.clone()))));
    children.extend(users.jobs.iter().map(|j| Child::Job(Box::new(j.clone()))));
    children.push(Child::NetworkPolicy(Box::new(network::build(&cluster, request.parent.spec.network.as_ref()))));
    // A bigger spec.storage.size: the claims grow (the template keeps its size).
    let grow = crate::grow::plan(&cluster, &observed, &request.related.claims, &request.children);
    children.extend(grow.children.iter().cloned());
    let observed_cron = |purpose| backups::observed_cron_job(&request.children.cron_jobs, &cluster, purpose);
    if let Some(refusal) = backup_refused {
        problems.push(refusal.into());
    } else {
        let initialized = bootstrap.initialized();
        children.extend(
            [
                backups::cron_job(&request.parent, &cluster, initialized, observed_cron(backups::SCHEDULED)),
                backups::binlog_cron_job(&request.parent, &cluster, initialized, observed_cron(backups::BINLOG)),
            ]
            .into_iter()
            .flatten()
            .map(|j| Child::CronJob(Box::new(j))),
        );
    }
    children.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));

    let mut status = status(
        &cluster,
        &observed,
        &previous,
        &Decisions {
            bootstrap: &bootstrap,
            roles: &roles,
            rollout: &rollout,
            template_hash: &template_hash,
            second_writers: &servers.second_writers,
        },
        &problems,
        ctx,
    );
    status.servers = servers.servers;
    add_backup_status(&mut status, request, &cluster, &pods, &previous, &restore, ctx);
    // A rollout's switchover that failed: the next one waits (each froze writes).
    if let (Some(why), Some(rollout)) = (&roles.rollout_switchover_failed, status.rollout.as_mut()) {
        rollout.switchover_failures = rollout.switchover_failures.saturating_add(1);
        let wait = roles::backoff_seconds(rollout.switchover_failures);
        let now = Timestamp::from_second(ctx.now.as_second()).unwrap_or(ctx.now);
        rollout.next_switchover_time = now
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(wait))
            .ok()
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
        rollout.last_switchover_error = Some(why.clone());
    }
    let root_local_only = crate::credentials::root_local_only(&cluster);
    for v in cluster
        .tls_verdict
        .iter()
        .chain(&users.verdict)
        .chain(&grow.verdict)
        .chain(&scale_down.verdict)
        .chain(std::iter::once(&root_local_only))
    {
        let mut extra = Conditions::new(&previous.conditions, ctx.now);
        extra.set(v.type_, v.status, v.reason, v.message.clone());
        merge_conditions(&mut status.conditions, extra.finish());
    }
    let busy = status.phase != Some(Phase::Running)
        || users.busy
        || grow.busy
        || matches!(bootstrap, Bootstrap::Running(_))
        || restore.blocks_bootstrap
        || !crate::conditions::is_true(&status.conditions, TEMPLATE_APPLIED);
    let resync =
        [busy.then_some(RESYNC_BUSY_SECONDS), roles.resync_after, rollout.resync_after, scale_down.resync_after]
            .into_iter()
            .flatten()
            .min();
    Ok(SyncResponse { status, children, resync_after_seconds: resync })
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
    keyed_by_name("ServiceAccount", &c.service_accounts)?;
    keyed_by_name("Role", &c.roles)?;
    keyed_by_name("RoleBinding", &c.role_bindings)?;
    keyed_by_name("Pod", &r.pods)?;
    keyed_by_name("Secret", &r.secrets)?;
    let names = crate::names::Names::new(m.name.as_deref().unwrap_or_default());
    ours("StatefulSet", &c.stateful_sets, |n| n == names.stateful_set)?;
    ours("ConfigMap", &c.config_maps, |n| n == names.config || config::is_option_file(&names, n))?;
    ours("Secret", &c.secrets, |n| {
        n == names.credentials
            || n == names.exporter
            || n.rsplit_once("-user-").is_some_and(|(_, user)| names.user_secret(user) == n)
    })?;
    Ok(())
}

/// Every observed StatefulSet, ConfigMap and Secret bears a name this `MySQL`
/// gives its children. Any other would be left out of the answer, and so deleted
/// (a StatefulSet with the cluster's data); Metacontroller never sends one for a
/// parent whose name cannot change, so such a request is refused, not obeyed.
fn ours<T>(kind: &str, objects: &ByKey<T>, is_ours: impl Fn(&str) -> bool) -> Result<()>
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    for object in objects.values() {
        let name = object.metadata().name.as_deref().unwrap_or_default();
        if !is_ours(name) {
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

/// What this sync leaves for the next one to recall, on the config ConfigMap.
pub(crate) use crate::build::config::Remembered;

/// The children every live cluster has.
fn desired_children(
    c: &Cluster,
    observed: &Observed<'_>,
    partition: i32,
    template: k8s_openapi::api::core::v1::PodTemplateSpec,
    remembered: &Remembered,
    ctx: &Context,
) -> Vec<Child> {
    let mut children = vec![
        Child::Service(Box::new(service::headless(c))),
        Child::Service(Box::new(service::primary(c))),
        Child::Service(Box::new(service::replicas(c))),
        Child::ConfigMap(Box::new(config::config_map(c, remembered))),
        Child::ConfigMap(Box::new(config::option_file(c))),
        Child::PodDisruptionBudget(Box::new(pdb::build(c))),
    ];
    // No server starts with credentials its Secret's owner did not opt in (issue 30.3).
    if !c.credentials_held {
        children.push(Child::StatefulSet(Box::new(statefulset::build(c, partition, template))));
    }
    children.extend(older_option_files(c, observed).into_iter().map(|m| Child::ConfigMap(Box::new(m))));
    children.extend(service::replica_endpoints(c, observed).into_iter().map(|s| Child::EndpointSlice(Box::new(s))));
    if c.owns_credentials {
        let secret: Secret = config::secret(c, observed.secret_data(&c.names.credentials), &ctx.entropy);
        children.push(Child::Secret(Box::new(secret)));
    }
    if c.exporter.is_some() {
        let secret = config::exporter_secret(c, observed.secret_data(&c.names.exporter), &ctx.entropy);
        children.push(Child::Secret(Box::new(secret)));
    }
    children
}

/// The option files of older revisions that a pod may still start with: every one
/// while the StatefulSet has pods or revisions other than its update revision (or
/// does not say), else those an observed pod still mounts. Emitted as observed.
fn older_option_files(c: &Cluster, observed: &Observed<'_>) -> Vec<k8s_openapi::api::core::v1::ConfigMap> {
    let desired = c.names.option_file(&c.config_hash);
    let settled = observed
        .stateful_set
        .and_then(|s| s.status.as_ref())
        .is_some_and(|s| s.current_revision.is_some() && s.current_revision == s.update_revision)
        && observed
            .stateful_set
            .is_some_and(|s| s.status.as_ref().and_then(|st| st.observed_generation) >= s.metadata.generation);
    let names_it = |volumes: Option<&Vec<k8s_openapi::api::core::v1::Volume>>, name: &str| {
        volumes.is_some_and(|v| v.iter().any(|v| v.config_map.as_ref().is_some_and(|cm| cm.name == name)))
    };
    // The observed template's own file (its pods may still restart with it), and
    // any file an observed pod mounts.
    let mounted = |name: &str| {
        observed
            .stateful_set
            .is_some_and(|s| names_it(s.spec.template.spec.as_ref().and_then(|p| p.volumes.as_ref()), name))
            || observed.members.values().any(|m| names_it(m.pod.spec.as_ref().and_then(|s| s.volumes.as_ref()), name))
    };
    observed
        .config_maps()
        .filter(|m| {
            let name = m.metadata.name.as_deref().unwrap_or_default();
            name != desired && config::is_option_file(&c.names, name) && (!settled || mounted(name))
        })
        .map(|m| k8s_openapi::api::core::v1::ConfigMap {
            metadata: crate::build::meta(
                m.metadata.name.as_deref().unwrap_or_default(),
                crate::labels::common(&c.names, crate::labels::DATABASE),
            ),
            data: m.data.clone(),
            immutable: Some(true),
            ..Default::default()
        })
        .collect()
}

/// Condition: whether the StatefulSet in the cluster carries the hook's current
/// pod template. The API server may keep rejecting what the hook emits (a value it
/// refuses that the CRD could not catch): Metacontroller then only logs and records
/// `SyncError` events, and without this condition the cluster would look merely
/// "held" while nothing can change (scaling, rollouts).
pub const TEMPLATE_APPLIED: &str = "TemplateApplied";
/// How long a template may take to reach the StatefulSet before it is reported as
/// not applied.
pub const APPLY_SECONDS: i64 = 120;

fn template_applied(want: &str, observed: &Observed<'_>, previous: &MySQLStatus, ctx: &Context) -> roles::Verdict {
    let verdict = |status, reason, message| roles::Verdict { type_: TEMPLATE_APPLIED, status, reason, message };
    let have = observed.stateful_set.map(|s| statefulset::template_hash(&s.spec.template));
    if have == Some(Some(want)) {
        return verdict(true, "Applied", format!("the StatefulSet carries template {want}"));
    }
    let since = previous
        .conditions
        .iter()
        .find(|x| x.type_ == TEMPLATE_APPLIED && x.status == "False")
        .map_or(ctx.now, |x| x.last_transition_time.0);
    let what = if have.is_none() { "does not exist yet (template" } else { "does not carry the new template" };
    let late = ctx.now.as_second() - since.as_second() > APPLY_SECONDS;
    let message = format!(
        "the StatefulSet {what} {want}{} since {}{}",
        if have.is_none() { ")" } else { "" },
        crate::jobs::seconds(since),
        if late {
            "; the API server is probably rejecting it: see the SyncError events of this MySQL (kubectl describe)"
        } else {
            ""
        }
    );
    verdict(false, if late { "NotApplied" } else { "Applying" }, message)
}

/// What this sync decided, for the status.
struct Decisions<'a> {
    bootstrap: &'a Bootstrap,
    roles: &'a Roles,
    rollout: &'a rollout::Plan,
    /// [`TEMPLATE_HASH`](statefulset::TEMPLATE_HASH) of the template emitted.
    template_hash: &'a str,
    /// [`servers::Plan::second_writers`].
    second_writers: &'a [String],
}

fn status(
    c: &Cluster,
    observed: &Observed<'_>,
    previous: &MySQLStatus,
    decisions: &Decisions<'_>,
    problems: &[Problem],
    ctx: &Context,
) -> MySQLStatus {
    let Decisions { bootstrap, roles, rollout, template_hash, second_writers } = *decisions;
    let members: Vec<_> = observed.members.values().filter(|m| m.ordinal < c.replicas).collect();
    let ready = i32::try_from(members.iter().filter(|m| m.ready).count()).unwrap_or(i32::MAX);
    let primary_ready = observed.member(&c.primary).is_some_and(|m| m.ready);
    let phase = if observed.stateful_set.is_none() {
        Phase::Pending
    } else if !bootstrap.initialized() {
        Phase::Initializing
    } else if !primary_ready {
        Phase::Failed
    } else if ready == c.replicas && second_writers.is_empty() {
        Phase::Running
    } else {
        Phase::Degraded
    };

    let mut conditions = Conditions::new(&previous.conditions, ctx.now);
    let (reason, message) = match phase {
        Phase::Pending => ("Creating", "creating the StatefulSet".to_owned()),
        Phase::Initializing if matches!(bootstrap, Bootstrap::WaitingForRestore) => {
            ("Restoring", format!("{ready}/{} servers Ready; restoring them from a backup (see Restored)", c.replicas))
        }
        Phase::Initializing => {
            ("Initializing", format!("{ready}/{} servers Ready; bootstrapping {}", c.replicas, c.primary))
        }
        Phase::Running => ("Running", format!("{ready}/{} servers Ready; primary {}", c.replicas, c.primary)),
        Phase::Degraded if !second_writers.is_empty() => (
            "SecondWritableServer",
            format!(
                "{ready}/{} servers Ready; primary {} serves; {} also reported writable at the last inspection: \
                 a second writer, which its agent keeps out of every Service and fences once it learns the \
                 newer epoch",
                c.replicas,
                c.primary,
                second_writers.join(", ")
            ),
        ),
        Phase::Degraded => ("Degraded", format!("{ready}/{} servers Ready; primary {} serves", c.replicas, c.primary)),
        Phase::Failed | Phase::Deleting => ("PrimaryNotReady", format!("primary {} is not Ready", c.primary)),
    };
    // A Running cluster (the common case) has no pod waiting for a node to report.
    let waiting = if phase == Phase::Running { Vec::new() } else { observed.unschedulable() };
    let message = match waiting.as_slice() {
        [] => message,
        waiting @ [(_, why), ..] => {
            let names: Vec<_> = waiting.iter().map(|(name, _)| *name).collect();
            format!("{message}; not scheduled: {} ({why})", names.join(", "))
        }
    };
    conditions.set("Ready", phase == Phase::Running, reason, message);
    match bootstrap {
        // The Job that did it may be gone, and the primary may have moved since: keep
        // the condition exactly as it was written when bootstrap succeeded.
        Bootstrap::Done(_) => {
            if !conditions.keep(bootstrap::INITIALIZED) {
                conditions.set(bootstrap::INITIALIZED, true, "Bootstrapped", "the first primary was bootstrapped");
            }
        }
        Bootstrap::Succeeded(_, result, _) => conditions.set(
            bootstrap::INITIALIZED,
            true,
            "Bootstrapped",
            format!("{} was bootstrapped as the first primary: {result}", c.primary),
        ),
        Bootstrap::WaitingForRestore => conditions.set(
            bootstrap::INITIALIZED,
            false,
            "WaitingForRestore",
            "every server is restored from the backup before the primary becomes writable",
        ),
        Bootstrap::WaitingForRetained(pods) => conditions.set(
            bootstrap::INITIALIZED,
            false,
            "WaitingForRetainedData",
            format!(
                "the volume claims of {} are older than this MySQL (retained from an earlier cluster of this name): the first primary is chosen once their servers have started, so no new, empty history is declared next to their data. To start without that data, delete those claims",
                pods.join(", ")
            ),
        ),
        Bootstrap::WaitingForPrimary => conditions.set(
            bootstrap::INITIALIZED,
            false,
            "WaitingForPrimary",
            format!("waiting for the pod {} to be created", c.primary),
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

    for v in roles.conditions.iter().chain([&rollout.verdict]) {
        conditions.set(v.type_, v.status, v.reason, v.message.clone());
    }
    let applied = template_applied(template_hash, observed, previous, ctx);
    conditions.set(TEMPLATE_APPLIED, applied.status, applied.reason, applied.message);

    MySQLStatus {
        phase: Some(phase),
        primary: Some(c.primary.clone()),
        replicas: i32::try_from(members.len()).unwrap_or(i32::MAX),
        ready_replicas: ready,
        servers: Vec::new(),
        observed_generation: previous.observed_generation,
        conditions: conditions.finish(),
        operation: roles.operation.clone(),
        operations_started: roles.operations_started,
        failover: roles.failover.clone(),
        switchover: roles.switchover.clone(),
        drain_switchover: roles.drain_switchover.clone(),
        role_changes: roles.role_changes.clone(),
        version: rollout.version.clone(),
        rollout: rollout.status.clone(),
        backup: None,
        restore: None,
    }
}

/// `status.backup`, `status.restore` and their conditions (`BackupSucceeded`,
/// `Restored`), added to the status the cluster's own state produced.
fn add_backup_status(
    status: &mut MySQLStatus,
    request: &SyncRequest,
    c: &Cluster,
    pods: &[&Pod],
    previous: &MySQLStatus,
    restore: &Restore,
    ctx: &Context,
) {
    let cron_job = |purpose| backups::observed_cron_job(&request.children.cron_jobs, c, purpose);
    status.backup = backups::scheduled_status(
        &request.parent,
        c,
        cron_job(backups::SCHEDULED),
        cron_job(backups::BINLOG),
        pods,
        previous.backup.as_ref(),
    );
    status.restore.clone_from(&restore.status);
    let mut extra = Conditions::new(&previous.conditions, ctx.now);
    if let Some(last) = status.backup.as_ref().and_then(|b| b.last.as_ref()) {
        if last.outcome == Some(BackupPhase::Succeeded) {
            let where_ = last.location.as_deref().unwrap_or_default();
            extra.set(
                backups::BACKUP_SUCCEEDED,
                true,
                "Succeeded",
                format!("backup {} written to {where_}", last.name),
            );
        } else {
            let why = last.message.as_deref().unwrap_or_default();
            extra.set(backups::BACKUP_SUCCEEDED, false, "Failed", format!("backup {} failed: {why}", last.name));
        }
    }
    if let Some(archive) = status.backup.as_ref().and_then(|b| b.binlog_archive.as_ref()) {
        let until = archive.archived_until.as_deref().unwrap_or("nothing yet");
        match archive.last.as_ref() {
            Some(last) if last.outcome == Some(BackupPhase::Succeeded) => extra.set(
                backups::BINLOGS_ARCHIVED,
                true,
                "Archived",
                format!("run {} archived the binary logs up to {until}", last.name),
            ),
            Some(last) => extra.set(
                backups::BINLOGS_ARCHIVED,
                false,
                "Failed",
                format!(
                    "run {} failed: {}; archived up to {until}",
                    last.name,
                    last.message.as_deref().unwrap_or_default()
                ),
            ),
            None => {}
        }
    }
    if let Some((ok, reason, message)) = &restore.condition {
        extra.set(restore::RESTORED, *ok, reason, message.clone());
    }
    merge_conditions(&mut status.conditions, extra.finish());
}

/// Adds `extra` to `conditions` (replacing same types), sorted by type.
pub(crate) fn merge_conditions(conditions: &mut Vec<Condition>, extra: Vec<Condition>) {
    conditions.retain(|c| !extra.iter().any(|e| e.type_ == c.type_));
    conditions.extend(extra);
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}
