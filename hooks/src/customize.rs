//! The customize hook: which related objects Metacontroller should send with every
//! sync. The cluster's pods (servers and Job pods) are not children (their owners
//! are the StatefulSet and the Jobs), yet readiness and Job results live on them.
//!
//! The answer depends on the parent's name and namespace only, as Metacontroller
//! caches it per parent generation. The namespace is always given: in v2 a rule
//! without one searches every namespace.

use crate::{
    error::{Error, Result},
    labels,
    metacontroller::{CustomizeRequest, CustomizeResponse, LabelSelector, RelatedResourceRule},
    names::Names,
};

/// Answers a customize call.
///
/// # Errors
/// [`Error::InvalidRequest`] when the parent has no name or namespace.
pub fn customize(request: &CustomizeRequest) -> Result<CustomizeResponse> {
    let m = &request.parent.metadata;
    let (Some(name), Some(namespace)) =
        (m.name.as_deref().filter(|n| !n.is_empty()), m.namespace.as_deref().filter(|n| !n.is_empty()))
    else {
        return Err(Error::InvalidRequest("parent.metadata.name and namespace are required".to_owned()));
    };
    let names = Names::new(name);
    Ok(CustomizeResponse {
        related_resources: vec![RelatedResourceRule {
            api_version: "v1".to_owned(),
            resource: "pods".to_owned(),
            namespace: Some(namespace.to_owned()),
            label_selector: LabelSelector { match_labels: labels::cluster_pods(&names) },
        }],
    })
}
