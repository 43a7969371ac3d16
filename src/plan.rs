//! `mysql-hook plan`: what the hook would do with a `MySQL` manifest, offline.
//!
//! The plan builds the request Metacontroller would send and answers it with the
//! same core and the same decoding as a served `/sync` (or `/finalize`, for a
//! `MySQL` being deleted), then replays what Metacontroller does with the answer:
//!
//! - the parent: the live `MySQL` (from `--live`) with the manifest's spec, labels
//!   and annotations applied as `kubectl apply` would, the CRD's defaults filled in
//!   and unknown fields dropped as the API server does, `metadata.generation` moved
//!   on when the spec changes and Metacontroller's finalizer added; without a live
//!   object, a new one (its uid is not known yet: a placeholder stands in);
//! - the children: live objects of every `childResources` type of
//!   `metacontroller/compositecontroller.yaml` in the parent's namespace that carry
//!   the generated selector's label `controller-uid: <parent uid>` and are owned by
//!   the parent or by nobody (Metacontroller adopts those), keyed
//!   `Kind.group/version`, then `namespace/name`;
//! - the related objects: whatever the customize hook (the same core) asks for;
//! - each desired child is compared with the live one through Metacontroller's own
//!   merge (`pkg/dynamic/apply`: the previous answer, kept in the annotation
//!   `metacontroller.k8s.io/last-applied-configuration`, decides what a field
//!   missing from the answer means; list items merge by `containerPort`, `port`,
//!   `mountPath`, `name`, `uid`, `ip` or `path`), so a difference shown is one
//!   Metacontroller would write, and the child's `updateStrategy` says whether it
//!   does (`OnDelete` children are left as they are);
//! - the status replaces the parent's status whole, with `observedGeneration`.
//!
//! Time and randomness come from the caller (the CLI: now, or `--now`, and fresh
//! entropy). Secret values are never printed: Secret `data`/`stringData` show as
//! placeholders, the last-applied annotation is never shown, and the text is
//! scrubbed of every Secret value before it is returned.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    io::Read as _,
    path::PathBuf,
    process::ExitCode,
};

use hooks::{Context, Timestamp, decode::LAST_APPLIED};
use serde::Deserialize as _;
use serde_json::{Map, Value, json};

/// The CompositeController the install creates: its child types, update
/// strategies, selector generation and finalize hook are what Metacontroller
/// acts on.
const COMPOSITE_CONTROLLER: &str = include_str!("../metacontroller/compositecontroller.yaml");

/// ObjectMeta fields Metacontroller reverts before comparing (read-only, system-set).
const SYSTEM_METADATA: [&str; 8] = [
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// The uid a `MySQL` that does not exist yet is planned with.
const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";

/// `(kind, apiVersion, resource)` of every type the plan handles: the child types
/// of the CompositeController and what the customize hook may ask for.
const KINDS: [(&str, &str, &str); 15] = [
    ("StatefulSet", "apps/v1", "statefulsets"),
    ("Service", "v1", "services"),
    ("ConfigMap", "v1", "configmaps"),
    ("Secret", "v1", "secrets"),
    ("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets"),
    ("EndpointSlice", "discovery.k8s.io/v1", "endpointslices"),
    ("Job", "batch/v1", "jobs"),
    ("CronJob", "batch/v1", "cronjobs"),
    ("NetworkPolicy", "networking.k8s.io/v1", "networkpolicies"),
    ("ServiceAccount", "v1", "serviceaccounts"),
    ("Role", "rbac.authorization.k8s.io/v1", "roles"),
    ("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings"),
    ("Pod", "v1", "pods"),
    ("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
    ("MySQLBackup", "mysqlhook.dev/v1alpha1", "mysqlbackups"),
];

const MYSQL_API_VERSION: &str = "mysqlhook.dev/v1alpha1";

/// `mysql-hook plan`: see the module documentation and the README.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// The `MySQL` manifest, YAML or JSON (`-`: standard input). Without it, the
    /// live `MySQL` of `--live` is planned as it stands.
    pub manifest: Option<PathBuf>,

    /// The live state as `kubectl get -o json` prints it (a List; `-`: standard
    /// input), e.g. `kubectl get -n NS mysql,statefulset,service,configmap,secret,pdb,endpointslice,job,cronjob,networkpolicy,pod,pvc -o json`.
    /// May be given more than once: the objects of all files count, a later file's
    /// object replacing an earlier one of the same type, namespace and name.
    #[arg(long, value_name = "FILE")]
    pub live: Vec<PathBuf>,

    /// Namespace of the `MySQL` when the manifest names none (default: the live
    /// `MySQL`'s of that name, else `default`).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,

    /// The instant to plan at (RFC 3339, e.g. `2026-11-29T12:00:00Z`); default: now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
}

/// What [`plan`] works from: the inputs' text, already read, and the context.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// `(label for the header, text)` of the manifest.
    pub manifest: Option<(String, String)>,
    /// `(label for the header, text)` of each file of the live state.
    pub live: Vec<(String, String)>,
    pub namespace: Option<String>,
    pub context: Context,
}

/// A rendered plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub text: String,
    /// The hook refuses the request: Metacontroller would change nothing and retry.
    pub refused: bool,
}

/// Reads the inputs, plans, prints. Exit status 0: a plan was printed; 1: the
/// inputs could not be used; 2: the hook would refuse the request.
#[must_use]
pub fn main(args: &PlanArgs, hook: &crate::cli::ServeArgs) -> ExitCode {
    match run(args, hook) {
        Ok(plan) => {
            print!("{}", plan.text);
            if plan.refused { ExitCode::from(2) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            eprintln!("mysql-hook plan: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The hook's own settings that shape its answers (`--scripts-image`,
/// `--allowed-images`) come from the same flags and environment as `serve`.
fn run(args: &PlanArgs, hook: &crate::cli::ServeArgs) -> Result<Plan, String> {
    if args.manifest.is_none() && args.live.is_empty() {
        return Err("give a MySQL manifest, the live state (--live), or both".to_owned());
    }
    let stdin_users = args.manifest.iter().chain(&args.live).filter(|p| p.as_os_str() == "-").count();
    if stdin_users > 1 {
        return Err("only one of the manifest and --live can be read from standard input".to_owned());
    }
    let read = |path: &PathBuf| -> Result<(String, String), String> {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| format!("reading standard input: {e}"))?;
            Ok(("standard input".to_owned(), text))
        } else {
            let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            Ok((path.display().to_string(), text))
        }
    };
    let now = match &args.now {
        Some(t) => t.parse::<Timestamp>().map_err(|e| format!("--now {t}: {e}"))?,
        None => Timestamp::now(),
    };
    let entropy = crate::app::system_entropy().ok_or("no randomness could be drawn for generated passwords")?;
    let inputs = Inputs {
        manifest: args.manifest.as_ref().map(read).transpose()?,
        live: args.live.iter().map(read).collect::<Result<_, _>>()?,
        namespace: args.namespace.clone(),
        context: Context {
            now,
            entropy,
            scripts_image: hook.scripts_image.clone(),
            allowed_images: hook.allowed_images.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect(),
            placement_policy: hook.placement_policy()?,
        },
    };
    plan(&inputs)
}

// ------------------------------------------------------------------ inputs

/// Every object in a YAML or JSON text: multi-document YAML, a single object, or a
/// `List` (what `kubectl get -o json` prints for several types), flattened.
///
/// # Errors
/// If the text is neither JSON nor YAML.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = match serde_json::from_str::<Value>(text) {
        Ok(v) => vec![v],
        Err(_) => serde_yaml::Deserializer::from_str(text)
            .map(Value::deserialize)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("neither JSON nor YAML: {e}"))?,
    };
    let mut out = Vec::new();
    for doc in docs {
        match doc {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List")) => {
                out.extend(o.get("items").and_then(Value::as_array).cloned().unwrap_or_default());
            }
            Value::Object(_) => out.push(doc),
            other => return Err(format!("expected Kubernetes objects, found {}", short(&other))),
        }
    }
    Ok(out.into_iter().map(normalize_numbers).collect())
}

/// Whole numbers as integers, as Kubernetes' JSON decoding does (`3.0` is `3`).
fn normalize_numbers(v: Value) -> Value {
    match v {
        Value::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => match n.as_f64() {
            #[allow(clippy::cast_possible_truncation)]
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(normalize_numbers).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, normalize_numbers(v))).collect()),
        other => other,
    }
}

fn kind_of(o: &Value) -> &str {
    o.get("kind").and_then(Value::as_str).unwrap_or_default()
}

fn api_version_of(o: &Value) -> &str {
    o.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
}

fn meta_str<'a>(o: &'a Value, field: &str) -> Option<&'a str> {
    o.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str)
}

fn name_of(o: &Value) -> &str {
    meta_str(o, "name").unwrap_or_default()
}

fn namespace_of(o: &Value) -> &str {
    meta_str(o, "namespace").unwrap_or_default()
}

fn labels_of(o: &Value) -> Map<String, Value> {
    o.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn metadata_mut(o: &mut Value) -> &mut Map<String, Value> {
    if !o.get("metadata").is_some_and(Value::is_object) {
        o["metadata"] = json!({});
    }
    match o.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

fn is_mysql(o: &Value) -> bool {
    kind_of(o) == "MySQL" && api_version_of(o) == MYSQL_API_VERSION
}

/// `Kind.group/version`, the key Metacontroller files objects of a type under.
fn type_key(kind: &str, api_version: &str) -> String {
    format!("{kind}.{api_version}")
}

fn kind_for_resource(api_version: &str, resource: &str) -> Option<&'static str> {
    KINDS.iter().find(|(_, v, r)| *v == api_version && *r == resource).map(|(k, _, _)| *k)
}

// ------------------------------------------------------------------ the controller

/// What the plan needs of the CompositeController.
struct Controller {
    object: Value,
    name: String,
    generate_selector: bool,
    has_finalize: bool,
    /// `(kind, apiVersion, update method)` per child type, in the controller's order.
    children: Vec<(String, String, String)>,
}

fn controller() -> Result<Controller, String> {
    let object = documents(COMPOSITE_CONTROLLER)?
        .into_iter()
        .find(|d| kind_of(d) == "CompositeController")
        .ok_or("metacontroller/compositecontroller.yaml holds no CompositeController")?;
    let spec = object.get("spec").cloned().unwrap_or_default();
    let mut children = Vec::new();
    for c in spec.get("childResources").and_then(Value::as_array).into_iter().flatten() {
        let api_version = c.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let resource = c.get("resource").and_then(Value::as_str).unwrap_or_default();
        let kind = kind_for_resource(api_version, resource)
            .ok_or_else(|| format!("the plan does not know the child type {resource} ({api_version})"))?;
        let method = c.pointer("/updateStrategy/method").and_then(Value::as_str).unwrap_or("OnDelete");
        children.push((kind.to_owned(), api_version.to_owned(), method.to_owned()));
    }
    Ok(Controller {
        name: name_of(&object).to_owned(),
        generate_selector: spec.get("generateSelector").and_then(Value::as_bool).unwrap_or(false),
        has_finalize: spec.pointer("/hooks/finalize").is_some(),
        children,
        object,
    })
}

// ------------------------------------------------------------------ the parent

/// The `MySQL` CRD's schema, as the API server defaults and prunes with it.
fn mysql_schema() -> Result<Value, String> {
    let crd = hooks::api::crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .find(|c| c.pointer("/spec/names/kind").and_then(Value::as_str) == Some("MySQL"))
        .ok_or("no MySQL CRD")?;
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .ok_or_else(|| "the MySQL CRD has no schema".to_owned())
}

/// Structural defaulting and pruning, as the API server applies a CRD's schema to
/// what is created: defaults fill absent fields, fields the schema does not
/// declare are dropped (their paths are returned).
fn default_and_prune(value: &mut Value, schema: &Value, path: &str, pruned: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let preserve = schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, prop) in props {
                    if !map.contains_key(key)
                        && let Some(default) = prop.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                }
                if !preserve {
                    // apiVersion, kind and metadata of the object itself are never pruned.
                    let kept = |k: &str| path.is_empty() && matches!(k, "apiVersion" | "kind" | "metadata");
                    let unknown: Vec<String> =
                        map.keys().filter(|k| !props.contains_key(*k) && !kept(k)).cloned().collect();
                    for key in unknown {
                        map.remove(&key);
                        pruned.push(format!("{path}.{key}"));
                    }
                }
                for (key, v) in map.iter_mut() {
                    if let Some(prop) = props.get(key) {
                        default_and_prune(v, prop, &format!("{path}.{key}"), pruned);
                    }
                }
            } else if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (key, v) in map.iter_mut() {
                    default_and_prune(v, additional, &format!("{path}.{key}"), pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    default_and_prune(v, item_schema, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// The manifest applied over the live object as `kubectl apply` does for a custom
/// resource (a JSON merge): what the manifest sets is set, objects merge key by key,
/// fields it set last time (its `kubectl.kubernetes.io/last-applied-configuration`)
/// and no longer sets are removed, fields others set are kept.
fn three_way(live: &mut Value, last: Option<&Value>, manifest: &Value) {
    let (Value::Object(live_map), Value::Object(wanted)) = (&mut *live, manifest) else {
        *live = manifest.clone();
        return;
    };
    for key in last.and_then(Value::as_object).into_iter().flat_map(Map::keys) {
        if !wanted.contains_key(key) {
            live_map.remove(key);
        }
    }
    for (key, value) in wanted {
        let last_value = last.and_then(|l| l.get(key));
        match live_map.get_mut(key) {
            Some(current) if current.is_object() && value.is_object() => three_way(current, last_value, value),
            _ => {
                live_map.insert(key.clone(), value.clone());
            }
        }
    }
}

/// `kubectl apply` of `manifest` (spec, labels, annotations) over the live
/// `MySQL`; the note says when fields dropped from the manifest stay.
fn kubectl_apply(live: &Value, manifest: &Value, notes: &mut Vec<String>) -> Value {
    let last: Option<Value> = live
        .pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok());
    if last.is_none() {
        notes.push(
            "the live MySQL has no kubectl.kubernetes.io/last-applied-configuration annotation (it was not made with `kubectl apply`): fields the manifest leaves out stay as they are live, as `kubectl apply` keeps them".to_owned(),
        );
    }
    let mut object = live.clone();
    let mut wanted = json!({"spec": manifest.get("spec").cloned().unwrap_or_else(|| json!({}))});
    let mut previous = json!({"spec": last.as_ref().and_then(|l| l.get("spec")).cloned().unwrap_or(Value::Null)});
    for field in ["labels", "annotations"] {
        wanted[field] = manifest.pointer(&format!("/metadata/{field}")).cloned().unwrap_or_else(|| json!({}));
        previous[field] =
            last.as_ref().and_then(|l| l.pointer(&format!("/metadata/{field}"))).cloned().unwrap_or(Value::Null);
    }
    let mut current = json!({
        "spec": object.get("spec").cloned().unwrap_or_else(|| json!({})),
        "labels": object.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        "annotations": object.pointer("/metadata/annotations").cloned().unwrap_or_else(|| json!({})),
    });
    three_way(&mut current, Some(&previous), &wanted);
    object["spec"] = current["spec"].take();
    let meta = metadata_mut(&mut object);
    for field in ["labels", "annotations"] {
        match current[field].take() {
            Value::Object(m) if !m.is_empty() => meta.insert(field.to_owned(), Value::Object(m)),
            _ => meta.remove(field),
        };
    }
    object
}

/// The parent as Metacontroller would send it.
struct Parent {
    object: Value,
    live: Option<Value>,
    notes: Vec<String>,
}

fn parent(
    manifest: Option<&Value>,
    live_mysql: Option<&Value>,
    namespace: &str,
    cc: &Controller,
    now: Timestamp,
) -> Result<Parent, String> {
    let schema = mysql_schema()?;
    let mut notes = Vec::new();
    let mut object = match (manifest, live_mysql) {
        (Some(m), live) => {
            let mut wanted = m.clone();
            metadata_mut(&mut wanted).insert("namespace".to_owned(), json!(namespace));
            let mut pruned = Vec::new();
            default_and_prune(&mut wanted, &schema, "", &mut pruned);
            for p in pruned.iter().filter(|p| !p.starts_with(".metadata") && !p.starts_with(".status")) {
                notes.push(format!(
                    "the manifest sets {}, which the MySQL CRD does not declare: `kubectl apply` refuses it (strict field validation); the plan leaves it out",
                    p.trim_start_matches('.')
                ));
            }
            if let Some(live) = live {
                let mut object = kubectl_apply(live, &wanted, &mut notes);
                let mut spec_only = json!({"spec": object.get("spec").cloned().unwrap_or_else(|| json!({}))});
                default_and_prune(&mut spec_only, &schema, "", &mut Vec::new());
                object["spec"] = spec_only["spec"].take();
                if object.get("spec") != live.get("spec") {
                    let generation = object.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                    metadata_mut(&mut object).insert("generation".to_owned(), json!(generation + 1));
                }
                object
            } else {
                let meta = metadata_mut(&mut wanted);
                meta.insert("uid".to_owned(), json!(PLACEHOLDER_UID));
                meta.insert("generation".to_owned(), json!(1));
                meta.insert("creationTimestamp".to_owned(), json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()));
                wanted.as_object_mut().map(|o| o.remove("status"));
                notes.push(format!(
                    "the MySQL does not exist yet: its uid is not known, so the plan uses {PLACEHOLDER_UID}; names derived from it (Job suffixes) will differ"
                ));
                wanted
            }
        }
        (None, Some(live)) => live.clone(),
        (None, None) => return Err("no MySQL to plan".to_owned()),
    };
    let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
    if cc.has_finalize && !deleting {
        let finalizer = format!("metacontroller.io/compositecontroller-{}", cc.name);
        let meta = metadata_mut(&mut object);
        let mut finalizers = meta.get("finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
        if !finalizers.iter().any(|f| f.as_str() == Some(&finalizer)) {
            finalizers.push(json!(finalizer));
            meta.insert("finalizers".to_owned(), Value::Array(finalizers));
        }
    }
    Ok(Parent { object, live: live_mysql.cloned(), notes })
}

// ------------------------------------------------------------------ children and related

/// Does `o` belong to the parent as Metacontroller claims children: the generated
/// selector's label, and owned by the parent or by no controller (adopted)?
fn claimed(o: &Value, parent_uid: &str, generate_selector: bool) -> bool {
    if generate_selector && labels_of(o).get("controller-uid").and_then(Value::as_str) != Some(parent_uid) {
        return false;
    }
    let controller_ref = o
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true));
    controller_ref.is_none_or(|r| r.get("uid").and_then(Value::as_str) == Some(parent_uid))
}

fn matches_labels(o: &Value, selector: &Map<String, Value>) -> bool {
    let labels = labels_of(o);
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The related objects the customize rules select from the live state, keyed as
/// Metacontroller keys them.
fn related(rules: &Value, live: &[Value], namespace: &str) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for rule in rules.get("relatedResources").and_then(Value::as_array).into_iter().flatten() {
        let api_version = rule.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let resource = rule.get("resource").and_then(Value::as_str).unwrap_or_default();
        let kind = kind_for_resource(api_version, resource).ok_or_else(|| {
            format!("the customize hook asks for {resource} ({api_version}), which the plan does not know")
        })?;
        let ns = rule.get("namespace").and_then(Value::as_str).unwrap_or(namespace);
        let selector = rule.pointer("/labelSelector/matchLabels").and_then(Value::as_object).cloned();
        let names: Vec<&str> =
            rule.get("names").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let group = out.entry(type_key(kind, api_version)).or_insert_with(|| json!({}));
        for o in live.iter().filter(|o| kind_of(o) == kind && api_version_of(o) == api_version && namespace_of(o) == ns)
        {
            let selected = selector.as_ref().is_none_or(|s| matches_labels(o, s))
                && (names.is_empty() || names.contains(&name_of(o)));
            if selected && let Some(g) = group.as_object_mut() {
                g.insert(format!("{ns}/{}", name_of(o)), o.clone());
            }
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ Metacontroller's merge

/// `pkg/dynamic/apply.Merge` of Metacontroller v4.17, re-stated: the change from
/// `last` (the previous answer) to `desired` (this answer) applied to `dest` (the
/// live object).
fn mc_merge(dest: Option<Value>, last: Option<&Value>, desired: &Value) -> Result<Value, String> {
    match dest {
        Some(Value::Object(dest)) => {
            let last = match last {
                Some(Value::Object(l)) => Some(l),
                None | Some(Value::Null) => None,
                Some(_) => {
                    return Err("the last-applied value is not an object where the live object has one".to_owned());
                }
            };
            let desired = match desired {
                Value::Object(d) => Some(d),
                Value::Null => None,
                _ => return Err("the hook's value is not an object where the live object has one".to_owned()),
            };
            Ok(Value::Object(mc_merge_object(dest, last, desired)?))
        }
        Some(Value::Array(dest)) => {
            let last = match last {
                Some(Value::Array(l)) => l.clone(),
                None | Some(Value::Null) => Vec::new(),
                Some(_) => return Err("the last-applied value is not a list where the live object has one".to_owned()),
            };
            let desired_list = match desired {
                Value::Array(d) => d.clone(),
                Value::Null => Vec::new(),
                _ => return Err("the hook's value is not a list where the live object has one".to_owned()),
            };
            match list_map_key(&[&dest, &last, &desired_list]) {
                Some(key) => mc_merge_list_map(key, &dest, &last, &desired_list),
                None => Ok(desired.clone()),
            }
        }
        _ => Ok(desired.clone()),
    }
}

fn mc_merge_object(
    mut dest: Map<String, Value>,
    last: Option<&Map<String, Value>>,
    desired: Option<&Map<String, Value>>,
) -> Result<Map<String, Value>, String> {
    for key in last.into_iter().flat_map(Map::keys) {
        if !desired.is_some_and(|d| d.contains_key(key)) {
            dest.remove(key);
        }
    }
    for (key, value) in desired.into_iter().flatten() {
        let merged = mc_merge(dest.remove(key), last.and_then(|l| l.get(key)), value)?;
        dest.insert(key.clone(), merged);
    }
    Ok(dest)
}

const MERGE_KEYS: [&str; 7] = ["containerPort", "port", "mountPath", "name", "uid", "ip", "path"];

/// The merge key Metacontroller guesses for a list: one of [`MERGE_KEYS`] that
/// every item of every version has, when all items are objects.
fn list_map_key(lists: &[&Vec<Value>]) -> Option<&'static str> {
    let mut common: Option<BTreeSet<&str>> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let obj = item.as_object()?;
        let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
        common = Some(match common {
            None => keys,
            Some(c) => c.intersection(&keys).copied().collect(),
        });
    }
    let common = common?;
    MERGE_KEYS.into_iter().find(|k| common.contains(k))
}

fn merge_key_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "<nil>".to_owned(),
    }
}

fn mc_merge_list_map(key: &str, dest: &[Value], last: &[Value], desired: &[Value]) -> Result<Value, String> {
    let as_map = |list: &[Value]| -> Map<String, Value> {
        list.iter().map(|i| (merge_key_string(i.get(key)), i.clone())).collect()
    };
    let (last_map, desired_map) = (as_map(last), as_map(desired));
    let merged = mc_merge_object(as_map(dest), Some(&last_map), Some(&desired_map))?;
    let mut out = Vec::new();
    let mut added = BTreeSet::new();
    for item in dest.iter().chain(desired) {
        let k = merge_key_string(item.get(key));
        if let Some(v) = merged.get(&k)
            && added.insert(k)
        {
            out.push(v.clone());
        }
    }
    Ok(Value::Array(out))
}

/// `ApplyUpdate`: the object Metacontroller would write, system metadata and
/// status reverted to the live ones. The last-applied annotation is left out (see
/// [`record_changes`]).
fn apply_update(observed: &Value, desired: &Value) -> Result<Value, String> {
    let last: Option<Value> = observed
        .pointer(&format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(|s| serde_json::from_str(s).map(normalize_numbers))
        .transpose()
        .map_err(|e| format!("its {LAST_APPLIED} annotation is not JSON: {e}"))?;
    let mut merged = mc_merge(Some(observed.clone()), last.as_ref(), desired)?;
    let live_meta = observed.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let meta = metadata_mut(&mut merged);
    for field in SYSTEM_METADATA {
        match live_meta.get(field) {
            Some(v) => meta.insert(field.to_owned(), v.clone()),
            None => meta.remove(field),
        };
    }
    if let Some(o) = merged.as_object_mut() {
        match observed.get("status") {
            Some(s) => o.insert("status".to_owned(), s.clone()),
            None => o.remove("status"),
        };
    }
    Ok(without_last_applied(&merged))
}

fn without_last_applied(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(Value::Object(ann)) = o.pointer_mut("/metadata/annotations") {
        ann.remove(LAST_APPLIED);
        if ann.is_empty()
            && let Some(Value::Object(meta)) = o.get_mut("metadata")
        {
            meta.remove("annotations");
        }
    }
    o
}

/// Whether Metacontroller's record of the previous answer changes (it is rewritten
/// with every answer that differs from it, even where no field does).
fn record_changes(observed: &Value, desired: &Value) -> bool {
    let last: Option<Value> = observed
        .pointer(&format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1")))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok())
        .map(normalize_numbers);
    last.as_ref() != Some(desired)
}

// ------------------------------------------------------------------ the plan

/// What happens to one object.
enum Action {
    Create { object: Value, blocked_by: Option<String> },
    Update { method: String, before: Value, after: Value },
    RecordOnly { method: String },
    Unchanged,
    Delete,
    Terminating { deleted: bool },
}

/// Plans `inputs` (see the module documentation).
///
/// # Errors
/// When the inputs name no usable `MySQL` or cannot be parsed.
pub fn plan(inputs: &Inputs) -> Result<Plan, String> {
    let cc = controller()?;
    let manifest_docs = inputs
        .manifest
        .as_ref()
        .map(|(label, text)| documents(text).map_err(|e| format!("{label}: {e}")))
        .transpose()?;
    let live = inputs
        .live
        .iter()
        .map(|(label, text)| documents(text).map_err(|e| format!("{label}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut notes = Vec::new();

    let manifest = match &manifest_docs {
        None => None,
        Some(docs) => {
            let mysqls: Vec<&Value> = docs.iter().filter(|d| is_mysql(d)).collect();
            for other in docs.iter().filter(|d| !is_mysql(d)) {
                notes.push(format!("{} {} in the manifest is not a MySQL; left out", kind_of(other), name_of(other)));
            }
            match mysqls.as_slice() {
                [one] => Some((*one).clone()),
                [] => return Err("the manifest holds no MySQL (apiVersion mysqlhook.dev/v1alpha1)".to_owned()),
                many => {
                    let names: Vec<&str> = many.iter().map(|m| name_of(m)).collect();
                    return Err(format!(
                        "the manifest holds {} MySQLs ({}); plan one at a time",
                        many.len(),
                        names.join(", ")
                    ));
                }
            }
        }
    };
    // An object in a later file replaces the one of the same type, namespace and name
    // in an earlier file.
    let mut live: Vec<Value> = live.into_iter().flatten().collect();
    let identity = |o: &Value| {
        (api_version_of(o).to_owned(), kind_of(o).to_owned(), namespace_of(o).to_owned(), name_of(o).to_owned())
    };
    let mut seen = BTreeSet::new();
    live.reverse();
    live.retain(|o| seen.insert(identity(o)));
    live.reverse();
    let live_mysqls: Vec<&Value> = live.iter().filter(|o| is_mysql(o)).collect();

    // Which MySQL, in which namespace.
    let (name, namespace) = match &manifest {
        Some(m) => {
            let name = name_of(m).to_owned();
            if name.is_empty() {
                return Err("the MySQL in the manifest has no metadata.name".to_owned());
            }
            let ns = meta_str(m, "namespace")
                .map(str::to_owned)
                .or_else(|| inputs.namespace.clone())
                .or_else(|| {
                    let same: Vec<&&Value> = live_mysqls.iter().filter(|l| name_of(l) == name).collect();
                    (same.len() == 1).then(|| namespace_of(same[0]).to_owned())
                })
                .unwrap_or_else(|| "default".to_owned());
            if let (Some(flag), Some(own)) = (&inputs.namespace, meta_str(m, "namespace"))
                && flag != own
            {
                return Err(format!("the manifest's namespace is {own}, but --namespace says {flag}"));
            }
            (name, ns)
        }
        None => match live_mysqls.as_slice() {
            [one] => (name_of(one).to_owned(), namespace_of(one).to_owned()),
            [] => return Err("the live state holds no MySQL, and no manifest was given".to_owned()),
            many => {
                let names: Vec<String> = many.iter().map(|m| format!("{}/{}", namespace_of(m), name_of(m))).collect();
                return Err(format!(
                    "the live state holds several MySQLs ({}); give the manifest to plan",
                    names.join(", ")
                ));
            }
        },
    };
    let live_mysql = live_mysqls.iter().find(|l| name_of(l) == name && namespace_of(l) == namespace).copied();
    let parent = parent(manifest.as_ref(), live_mysql, &namespace, &cc, inputs.context.now)?;
    notes.extend(parent.notes.iter().cloned());
    let uid = meta_str(&parent.object, "uid").unwrap_or(PLACEHOLDER_UID).to_owned();
    let finalizing = parent.object.pointer("/metadata/deletionTimestamp").is_some();

    if !inputs.live.is_empty() && live_mysql.is_some() {
        let in_ns = |kind: &str| live.iter().any(|o| kind_of(o) == kind && namespace_of(o) == namespace);
        for (kind, _, _) in &cc.children {
            // Jobs and the grow Job's ServiceAccount, Role and RoleBinding come and go.
            let transient = ["Job", "CronJob", "ServiceAccount", "Role", "RoleBinding"].contains(&kind.as_str());
            if !in_ns(kind) && !transient {
                notes.push(format!(
                    "the live state holds no {kind}: any the hook wants is shown as created (was it left out of `kubectl get`?)"
                ));
            }
        }
        if !in_ns("Pod") {
            notes.push(
                "the live state holds no Pod: the hook sees no server running (add `pod` to `kubectl get`)".to_owned(),
            );
        }
    }

    // The observed children, keyed as Metacontroller keys them.
    let mut children = Map::new();
    for (kind, api_version, _) in &cc.children {
        let mut group = Map::new();
        if live_mysql.is_some() {
            for o in live
                .iter()
                .filter(|o| kind_of(o) == kind && api_version_of(o) == api_version && namespace_of(o) == namespace)
            {
                if claimed(o, &uid, cc.generate_selector) {
                    group.insert(format!("{namespace}/{}", name_of(o)), o.clone());
                }
            }
        }
        children.insert(type_key(kind, api_version), Value::Object(group));
    }

    // The customize hook, then the related objects it selects.
    let customize_body = json!({"controller": cc.object, "parent": parent.object});
    let rules = call(&inputs.context, "customize", &customize_body)?;
    let Ok(rules) = rules else {
        let (status, message) = rules.err().unwrap_or_default();
        return Ok(refusal(&name, &namespace, "customize", status, &message, &notes));
    };
    let related = related(&rules, &live, &namespace)?;

    let hook = if finalizing { "finalize" } else { "sync" };
    let request = json!({
        "controller": cc.object,
        "parent": parent.object,
        "children": children,
        "related": related,
        "finalizing": finalizing,
    });
    let answer = match call(&inputs.context, hook, &request)? {
        Ok(answer) => answer,
        Err((status, message)) => return Ok(refusal(&name, &namespace, hook, status, &message, &notes)),
    };

    // The desired children as Metacontroller files them.
    let mut desired: BTreeMap<(String, String), Value> = BTreeMap::new();
    for child in answer.get("children").and_then(Value::as_array).into_iter().flatten() {
        let mut child = child.clone();
        if namespace_of(&child).is_empty() {
            metadata_mut(&mut child).insert("namespace".to_owned(), json!(namespace));
        }
        if cc.generate_selector {
            let meta = metadata_mut(&mut child);
            let mut labels = meta.get("labels").and_then(Value::as_object).cloned().unwrap_or_default();
            labels.entry("controller-uid").or_insert_with(|| json!(uid));
            meta.insert("labels".to_owned(), Value::Object(labels));
        }
        let key = type_key(kind_of(&child), api_version_of(&child));
        desired.insert((key, format!("{}/{}", namespace_of(&child), name_of(&child))), child);
    }
    let mut observed: BTreeMap<(String, String), Value> = BTreeMap::new();
    for (key, group) in &children {
        for (name, o) in group.as_object().into_iter().flatten() {
            observed.insert((key.clone(), name.clone()), o.clone());
        }
    }
    let method_of = |key: &str| -> String {
        cc.children
            .iter()
            .find(|(k, v, _)| type_key(k, v) == key)
            .map_or_else(|| "OnDelete".to_owned(), |(_, _, m)| m.clone())
    };

    let mut actions: Vec<((String, String), Action)> = Vec::new();
    for (id, want) in &desired {
        let action = match observed.get(id) {
            None => {
                let taken = live.iter().find(|o| {
                    type_key(kind_of(o), api_version_of(o)) == id.0
                        && format!("{}/{}", namespace_of(o), name_of(o)) == id.1
                });
                Action::Create {
                    object: want.clone(),
                    blocked_by: taken.map(|_| {
                        "an object of that name exists and is not this MySQL's child: the create fails (AlreadyExists) until it is removed".to_owned()
                    }),
                }
            }
            Some(live_child) if live_child.pointer("/metadata/deletionTimestamp").is_some() => {
                Action::Terminating { deleted: false }
            }
            Some(live_child) => {
                let after = apply_update(live_child, want).map_err(|e| format!("{} {}: {e}", id.0, id.1))?;
                let before = without_last_applied(live_child);
                let method = method_of(&id.0);
                if after != before {
                    Action::Update { method, before, after }
                } else if record_changes(live_child, want) {
                    Action::RecordOnly { method }
                } else {
                    Action::Unchanged
                }
            }
        };
        actions.push((id.clone(), action));
    }
    for (id, o) in &observed {
        if !desired.contains_key(id) {
            let action = if o.pointer("/metadata/deletionTimestamp").is_some() {
                Action::Terminating { deleted: true }
            } else {
                Action::Delete
            };
            actions.push((id.clone(), action));
        }
    }
    actions.sort_by(|a, b| (kind_order(&a.0.0), &a.0.1).cmp(&(kind_order(&b.0.0), &b.0.1)));

    // The live StatefulSet installs scripts from another image than this plan used.
    if let Some(sts) = observed.iter().find(|((k, _), _)| k == "StatefulSet.apps/v1").map(|(_, o)| o) {
        let live_image = sts
            .pointer("/spec/template/spec/initContainers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("name").and_then(Value::as_str) == Some("install-scripts"))
            .and_then(|c| c.get("image"))
            .and_then(Value::as_str);
        if let Some(image) = live_image.filter(|i| *i != inputs.context.scripts_image) {
            notes.push(format!(
                "the live StatefulSet installs the scripts from {image}, this plan from {} (--scripts-image / MYSQL_HOOK_SCRIPTS_IMAGE): pass the deployed hook's image to plan what it would do",
                inputs.context.scripts_image
            ));
        }
    }

    let secrets = secret_values(desired.values().chain(&live));
    let mut out = String::new();
    let live_label =
        (!inputs.live.is_empty()).then(|| inputs.live.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join(", "));
    let manifest_label = inputs.manifest.as_ref().map(|(l, _)| l.as_str());
    header(
        &mut out,
        &name,
        &namespace,
        hook,
        inputs.context.now,
        manifest_label,
        live_label.as_deref(),
        &live,
        live_mysql.is_some(),
    );
    spec_section(&mut out, parent.live.as_ref(), &parent.object);
    for note in &notes {
        let _ = writeln!(out, "note: {note}");
    }
    if !notes.is_empty() {
        out.push('\n');
    }

    let mut counts = BTreeMap::<&str, usize>::new();
    for ((key, id), action) in &actions {
        let kind = key.split('.').next().unwrap_or_default();
        let secret = kind == "Secret";
        match action {
            Action::Create { object, blocked_by } => {
                *counts.entry("create").or_default() += 1;
                let _ = writeln!(out, "+ {kind} {id}: create");
                if let Some(why) = blocked_by {
                    let _ = writeln!(out, "    ! {why}");
                }
                let mut shown = object.clone();
                if secret {
                    mask_secret(&mut shown, &secrets);
                }
                out.push_str(&indent(&yaml(&shown), "    "));
            }
            Action::Update { method, before, after } => {
                let (mut before, mut after) = (before.clone(), after.clone());
                if secret {
                    mask_secret(&mut before, &secrets);
                    mask_secret(&mut after, &secrets);
                }
                let what = match method.as_str() {
                    "InPlace" | "RollingInPlace" => {
                        *counts.entry("update").or_default() += 1;
                        "update in place"
                    }
                    "Recreate" | "RollingRecreate" => {
                        *counts.entry("recreate").or_default() += 1;
                        "delete and create again (updateStrategy Recreate)"
                    }
                    _ => {
                        *counts.entry("left as it is").or_default() += 1;
                        "differs, but left as it is (updateStrategy OnDelete: delete it to have it created anew)"
                    }
                };
                let _ = writeln!(out, "~ {kind} {id}: {what}");
                let mut lines = Vec::new();
                diff(&mut lines, "", Some(&before), Some(&after));
                for line in lines {
                    out.push_str(&indent(&line, "    "));
                }
            }
            Action::RecordOnly { method } => {
                if matches!(method.as_str(), "InPlace" | "RollingInPlace") {
                    *counts.entry("update").or_default() += 1;
                    let _ = writeln!(
                        out,
                        "~ {kind} {id}: update in place, no field changes (only Metacontroller's record of the answer, the {LAST_APPLIED} annotation)"
                    );
                } else {
                    *counts.entry("unchanged").or_default() += 1;
                    let _ = writeln!(out, "= {kind} {id}: unchanged");
                }
            }
            Action::Unchanged => {
                *counts.entry("unchanged").or_default() += 1;
                let _ = writeln!(out, "= {kind} {id}: unchanged");
            }
            Action::Delete => {
                *counts.entry("delete").or_default() += 1;
                let _ = writeln!(out, "- {kind} {id}: delete (not in the hook's answer)");
            }
            Action::Terminating { deleted } => {
                *counts.entry("unchanged").or_default() += 1;
                let extra = if *deleted { "; not in the hook's answer either" } else { "" };
                let _ = writeln!(out, "= {kind} {id}: being deleted already, left alone{extra}");
            }
        }
    }
    out.push('\n');
    status_section(&mut out, parent.live.as_ref(), &parent.object, &answer, finalizing);
    let summary: Vec<String> = ["create", "update", "recreate", "delete", "left as it is", "unchanged"]
        .iter()
        .filter_map(|k| counts.get(k).map(|n| format!("{n} {k}")))
        .collect();
    let _ =
        writeln!(out, "\nPlan: {}.", if summary.is_empty() { "no children".to_owned() } else { summary.join(", ") });
    Ok(Plan { text: scrub(out, &secrets), refused: false })
}

fn kind_order(key: &str) -> usize {
    let kind = key.split('.').next().unwrap_or_default();
    KINDS.iter().position(|(k, _, _)| *k == kind).unwrap_or(KINDS.len())
}

/// Calls a hook through the same decoding and core as the server: `Ok(answer)` on
/// 200, `Err((status, message))` when it refuses.
fn call(ctx: &Context, hook: &str, body: &Value) -> Result<Result<Value, (u16, String)>, String> {
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let answer = crate::app::answer_hook(hook, &bytes, ctx);
    if answer.status.as_u16() == 200 {
        serde_json::from_slice(&answer.body).map(Ok).map_err(|e| format!("the {hook} answer is not JSON: {e}"))
    } else {
        Ok(Err((answer.status.as_u16(), String::from_utf8_lossy(&answer.body).trim().to_owned())))
    }
}

fn refusal(name: &str, namespace: &str, hook: &str, status: u16, message: &str, notes: &[String]) -> Plan {
    let mut text =
        format!("MySQL {namespace}/{name}: the {hook} hook refuses this request (HTTP {status}):\n  {message}\n");
    for note in notes {
        let _ = writeln!(text, "note: {note}");
    }
    text.push_str(
        "\nMetacontroller would change nothing, record a SyncError event on the MySQL and retry with backoff.\n",
    );
    Plan { text, refused: true }
}

#[allow(clippy::too_many_arguments)]
fn header(
    out: &mut String,
    name: &str,
    namespace: &str,
    hook: &str,
    now: Timestamp,
    manifest: Option<&str>,
    live: Option<&str>,
    live_objects: &[Value],
    exists: bool,
) {
    let _ = writeln!(out, "MySQL {namespace}/{name}: the {hook} hook at {}", now.strftime("%Y-%m-%dT%H:%M:%SZ"));
    if let Some(m) = manifest {
        let _ = writeln!(out, "  manifest:   {m}");
    }
    match live {
        Some(l) => {
            let state = if exists { "" } else { "; the MySQL is not in it (a new cluster)" };
            let _ = writeln!(out, "  live state: {l} ({} objects{state})", live_objects.len());
        }
        None => {
            let _ = writeln!(out, "  live state: none (--live not given: planned as a new cluster)");
        }
    }
    out.push('\n');
}

fn spec_section(out: &mut String, live: Option<&Value>, parent: &Value) {
    let Some(live) = live else { return };
    let mut lines = Vec::new();
    for field in ["spec", "metadata.labels", "metadata.annotations", "metadata.generation"] {
        let pointer = format!("/{}", field.replace('.', "/"));
        diff(&mut lines, field, live.pointer(&pointer), parent.pointer(&pointer));
    }
    if lines.is_empty() {
        out.push_str("The MySQL's spec, labels and annotations are as they are live.\n\n");
    } else {
        out.push_str("The MySQL changes:\n");
        for line in lines {
            out.push_str(&indent(&line, "    "));
        }
        out.push('\n');
    }
}

fn status_section(out: &mut String, live: Option<&Value>, parent: &Value, answer: &Value, finalizing: bool) {
    let mut status = answer.get("status").cloned().unwrap_or_else(|| json!({}));
    if let Some(s) = status.as_object_mut() {
        s.insert(
            "observedGeneration".to_owned(),
            parent.pointer("/metadata/generation").cloned().unwrap_or(Value::Null),
        );
    }
    let before = live.and_then(|l| l.get("status"));
    match before {
        None => {
            out.push_str("Status (new):\n");
            out.push_str(&indent(&yaml(&status), "    "));
        }
        Some(b) if *b == status => out.push_str("Status: unchanged\n"),
        Some(b) => {
            out.push_str("Status:\n");
            let mut lines = Vec::new();
            diff(&mut lines, "status", Some(b), Some(&status));
            for line in lines {
                out.push_str(&indent(&line, "    "));
            }
        }
    }
    if let Some(seconds) = answer.get("resyncAfterSeconds") {
        let _ = writeln!(out, "The hook asks to be called again in {seconds} s (resyncAfterSeconds).");
    }
    if finalizing {
        match answer.get("finalized").and_then(Value::as_bool) {
            Some(true) => out.push_str("Finalized: yes: Metacontroller removes its finalizer and the MySQL goes.\n"),
            _ => out.push_str("Finalized: not yet: the MySQL stays until a later call says so.\n"),
        }
    }
}

// ------------------------------------------------------------------ rendering

fn yaml(v: &Value) -> String {
    serde_yaml::to_string(v).unwrap_or_else(|e| format!("<{e}>\n"))
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines().map(|l| if l.is_empty() { "\n".to_owned() } else { format!("{prefix}{l}\n") }).collect()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 { format!("{}...", s.chars().take(77).collect::<String>()) } else { s }
}

/// `path` extended by an object key: `a.b`, or `a["app.kubernetes.io/name"]`.
fn join_path(path: &str, key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
    } else {
        format!("{path}[{}]", Value::from(key))
    }
}

/// The key to match list items by, for display: one every item has, unique.
fn display_key(a: &[Value], b: &[Value]) -> Option<&'static str> {
    const KEYS: [&str; 8] = ["name", "type", "containerPort", "port", "mountPath", "key", "ip", "path"];
    KEYS.into_iter().find(|k| {
        [a, b].iter().all(|list| {
            let mut seen = BTreeSet::new();
            list.iter().all(|i| {
                i.get(*k).is_some_and(|v| !v.is_object() && !v.is_array()) && seen.insert(i.get(*k).map(short))
            })
        })
    })
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => {
            let compact = v.to_string();
            if compact.len() <= 60 { compact } else { format!("\n{}", indent(&yaml(v), "    ").trim_end()) }
        }
        _ => v.to_string(),
    }
}

/// `+ path: value`, or `+ path:` and an indented YAML block.
fn line(sign: char, path: &str, text: &str) -> String {
    if text.starts_with('\n') { format!("{sign} {path}:{text}") } else { format!("{sign} {path}: {text}") }
}

/// `~ path: old -> new`, or, for values too big for a line, both as YAML blocks.
fn change(path: &str, before: &Value, after: &Value) -> String {
    let (b, a) = (value_text(before), value_text(after));
    if b.starts_with('\n') || a.starts_with('\n') {
        let block = |v: &Value| indent(&yaml(v), "        ").trim_end().to_owned();
        format!("~ {path}:\n    was:\n{}\n    now:\n{}", block(before), block(after))
    } else {
        format!("~ {path}: {b} -> {a}")
    }
}

/// Changed fields only, one line each (`~ path: old -> new`, `+ path: new`,
/// `- path: old`); values too big for a line follow as indented YAML.
fn diff(out: &mut Vec<String>, path: &str, before: Option<&Value>, after: Option<&Value>) {
    match (before, after) {
        (None, None) => {}
        (Some(b), Some(a)) if a == b => {}
        (None, Some(a)) => out.push(line('+', path, &value_text(a))),
        (Some(b), None) => out.push(line('-', path, &value_text(b))),
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for key in keys {
                diff(out, &join_path(path, key), b.get(key), a.get(key));
            }
        }
        (Some(Value::Array(b)), Some(Value::Array(a))) => {
            if let Some(key) = display_key(b, a) {
                let id = |i: &Value| {
                    i.get(key).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).unwrap_or_default()
                };
                let b_ids: Vec<String> = b.iter().map(id).collect();
                let a_ids: Vec<String> = a.iter().map(id).collect();
                let mut order: Vec<&String> = b_ids.iter().collect();
                order.extend(a_ids.iter().filter(|i| !b_ids.contains(i)));
                for k in order {
                    let bi = b.iter().find(|i| id(i) == *k);
                    let ai = a.iter().find(|i| id(i) == *k);
                    diff(out, &format!("{path}[{key}={k}]"), bi, ai);
                }
                let common_b: Vec<&String> = b_ids.iter().filter(|i| a_ids.contains(i)).collect();
                let common_a: Vec<&String> = a_ids.iter().filter(|i| b_ids.contains(i)).collect();
                if common_a != common_b {
                    out.push(format!("~ {path}: order {} -> {}", join_ids(&common_b), join_ids(&common_a)));
                }
            } else if a.len() == b.len() {
                for (i, (bi, ai)) in b.iter().zip(a).enumerate() {
                    diff(out, &format!("{path}[{i}]"), Some(bi), Some(ai));
                }
            } else {
                out.push(change(path, &Value::Array(b.clone()), &Value::Array(a.clone())));
            }
        }
        (Some(b), Some(a)) => out.push(change(path, b, a)),
    }
}

fn join_ids(ids: &[&String]) -> String {
    ids.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

// ------------------------------------------------------------------ secrets

/// Every Secret value (base64 as stored and decoded), numbered in a fixed order.
fn secret_values<'a>(objects: impl Iterator<Item = &'a Value>) -> Vec<String> {
    let mut values = Vec::new();
    for o in objects.filter(|o| kind_of(o) == "Secret") {
        for field in ["data", "stringData"] {
            for v in o.get(field).and_then(Value::as_object).into_iter().flat_map(Map::values) {
                if let Some(s) = v.as_str()
                    && !values.iter().any(|x: &String| x == s)
                {
                    values.push(s.to_owned());
                }
            }
        }
    }
    values
}

fn decode_base64(s: &str) -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = u32::try_from(ALPHABET.iter().position(|a| *a == c)?).ok()?;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push(u8::try_from((bits >> n) & 0xff).ok()?);
        }
    }
    String::from_utf8(out).ok()
}

/// Secret values as numbered placeholders: equal values share a number, so a
/// change shows without its content.
fn mask_secret(o: &mut Value, secrets: &[String]) {
    for field in ["data", "stringData"] {
        if let Some(Value::Object(map)) = o.get_mut(field) {
            for v in map.values_mut() {
                let text = v.as_str().unwrap_or_default();
                let number = secrets.iter().position(|s| s == text).map_or(0, |i| i + 1);
                let bytes = if field == "data" { decode_base64(text).map_or(0, |d| d.len()) } else { text.len() };
                *v = json!(format!("(hidden #{number}: {bytes} bytes)"));
            }
        }
    }
}

/// Belt and braces: no Secret value, stored or decoded, survives in the text.
fn scrub(mut text: String, secrets: &[String]) -> String {
    for s in secrets {
        for form in [Some(s.clone()), decode_base64(s)].into_iter().flatten() {
            if form.len() >= 6 && text.contains(&form) {
                text = text.replace(&form, "(hidden)");
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{diff, list_map_key, mc_merge};

    /// Metacontroller's merge: a field dropped from the answer is removed only if
    /// the previous answer had it; lists of named items merge by name.
    #[test]
    fn merge_follows_metacontroller() {
        let live = json!({"a": 1, "b": 2, "server": 3, "l": [{"name": "x", "v": 1, "d": 0}, {"name": "y", "v": 2}]});
        let last = json!({"a": 1, "b": 2, "l": [{"name": "x", "v": 1}, {"name": "y", "v": 2}]});
        let desired = json!({"a": 5, "l": [{"name": "y", "v": 3}, {"name": "z", "v": 4}]});
        let merged = mc_merge(Some(live), Some(&last), &desired).unwrap_or_default();
        assert_eq!(merged, json!({"a": 5, "server": 3, "l": [{"name": "y", "v": 3}, {"name": "z", "v": 4}]}));
        assert_eq!(list_map_key(&[&vec![json!(1)]]), None);
    }

    #[test]
    fn diff_names_changed_fields_only() {
        let mut lines = Vec::new();
        let before = json!({"spec": {"replicas": 3, "c": [{"name": "m", "image": "a"}], "same": 1}});
        let after = json!({"spec": {"replicas": 5, "c": [{"name": "m", "image": "b"}], "same": 1}});
        diff(&mut lines, "", Some(&before), Some(&after));
        assert_eq!(lines, vec!["~ spec.c[name=m].image: \"a\" -> \"b\"", "~ spec.replicas: 3 -> 5"]);
    }
}
