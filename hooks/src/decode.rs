//! Decoding observed objects without the two records the hook never reads.
//!
//! - `metadata.managedFields`: the API server gives every object this list (who set
//!   which field, as a free-form `fieldsV1` tree) and Metacontroller passes it on;
//!   k8s-openapi would build each entry's tree as a `serde_json::Value`, a map
//!   allocation per field of every child and pod on every call.
//! - The annotation `metacontroller.k8s.io/last-applied-configuration`:
//!   Metacontroller's record of our previous answer, on every child, as long as
//!   the child itself and all of it escaped JSON text. Nothing in the hook reads
//!   it; a Job kept as it is ([`crate::jobs::keep`]) copies a Job's annotations,
//!   but Jobs are `OnDelete` children, so an answer's annotations for an existing
//!   Job are never applied.
//!
//! Together they are about half of a captured request's bytes (107 of 217 KB). [`object`] and
//! [`by_key`] decode an object into its k8s-openapi type through a thin
//! [`Deserializer`] adapter that passes everything through unchanged except those
//! two keys, at exactly those places (`metadata.managedFields`,
//! `metadata.annotations[last-applied]`), which are skipped unbuilt. Everything
//! else is decoded and checked as before: a malformed child is still an error,
//! never a missing child. A key of either name anywhere else (a ConfigMap's data,
//! a label) is kept.

use std::{borrow::Cow, collections::BTreeMap, fmt, marker::PhantomData};

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor,
    value::{BorrowedStrDeserializer, StringDeserializer},
};

const METADATA: &str = "metadata";
const MANAGED_FIELDS: &str = "managedFields";
const ANNOTATIONS: &str = "annotations";
/// Metacontroller's record of the previous answer, on each child it applied.
pub const LAST_APPLIED: &str = "metacontroller.k8s.io/last-applied-configuration";

/// One object, its two unread records (see the module docs) skipped. For
/// `deserialize_with`.
///
/// # Errors
/// As decoding `T` itself, for anything but those two records.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    T::deserialize(Filter { inner: deserializer, level: Level::Object })
}

/// Objects keyed as Metacontroller keys them, each decoded as [`object`] does.
/// For `deserialize_with`.
///
/// # Errors
/// As decoding the map into `BTreeMap<String, T>`, for anything but the two
/// records [`object`] skips.
pub fn by_key<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, T>, D::Error> {
    struct ByKey<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ByKey<T> {
        type Value = BTreeMap<String, T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of objects")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(Seed { level: Level::Object, inner: PhantomData::<T> })?;
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(ByKey(PhantomData))
}

/// Where in an object the adapter is: at its top (watching for `metadata`), in
/// its `metadata` (skipping `managedFields`, watching for `annotations`), or in its
/// annotations (skipping [`LAST_APPLIED`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Object,
    Metadata,
    Annotations,
}

impl Level {
    /// Whether `key` at this level is skipped.
    fn skips(self, key: &str) -> bool {
        match self {
            Self::Object => false,
            Self::Metadata => key == MANAGED_FIELDS,
            Self::Annotations => key == LAST_APPLIED,
        }
    }

    /// The level of `key`'s value, when it is filtered too.
    fn below(self, key: &str) -> Option<Self> {
        match self {
            Self::Object if key == METADATA => Some(Self::Metadata),
            Self::Metadata if key == ANNOTATIONS => Some(Self::Annotations),
            _ => None,
        }
    }
}

/// Decodes a `T` at `level`.
struct Seed<T> {
    level: Level,
    inner: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Seed<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        T::deserialize(Filter { inner: deserializer, level: self.level })
    }
}

/// Hands a seed a value through the filter at `level`.
struct LevelSeed<S> {
    inner: S,
    level: Level,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for LevelSeed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Filter { inner: deserializer, level: self.level })
    }
}

/// The adapter: maps and structs are visited through [`FilterMap`]; every other
/// request goes to the inner deserializer untouched.
struct Filter<D> {
    inner: D,
    level: Level,
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* visitor)
        })*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filter<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(FilterVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(FilterVisitor { inner: visitor, level: self.level })
    }

    /// k8s-openapi decodes `metadata` as an `Option<ObjectMeta>` first.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(FilterVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, FilterVisitor { inner: visitor, level: self.level })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }

    forward! {
        deserialize_bool(), deserialize_i8(), deserialize_i16(), deserialize_i32(), deserialize_i64(),
        deserialize_i128(), deserialize_u8(), deserialize_u16(), deserialize_u32(), deserialize_u64(),
        deserialize_u128(), deserialize_f32(), deserialize_f64(), deserialize_char(), deserialize_str(),
        deserialize_string(), deserialize_bytes(), deserialize_byte_buf(),
        deserialize_unit(), deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str), deserialize_seq(), deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(), deserialize_ignored_any(),
    }
}

/// Wraps the visitor's map access; any other value is handed to it as is.
struct FilterVisitor<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilterVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(FilterMap { inner: map, level: self.level, next: None })
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Filter { inner: deserializer, level: self.level })
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.inner.visit_bool(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.inner.visit_i64(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.inner.visit_u64(v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.inner.visit_f64(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.inner.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.inner.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.inner.visit_string(v)
    }
}

/// A map's keys, minus those its level skips; the value of a key with a level
/// below it is decoded through the filter again.
struct FilterMap<A> {
    inner: A,
    level: Level,
    /// The level of the value of the key just handed out, when it has one.
    next: Option<Level>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilterMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key_seed(KeySeed)? else { return Ok(None) };
            if self.level.skips(&key) {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.next = self.level.below(&key);
            return match key {
                Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        match self.next.take() {
            Some(level) => self.inner.next_value_seed(LevelSeed { inner: seed, level }),
            None => self.inner.next_value_seed(seed),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A map key, borrowed from the request when it holds no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        struct Key;
        impl<'de> Visitor<'de> for Key {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        deserializer.deserialize_str(Key)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::{Value, json};

    use crate::metacontroller::SyncRequest;

    fn captured() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../test-fixtures/sync/captured-running/request.json");
        let body = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Removes `metadata.managedFields` and the last-applied annotation from the
    /// parent and every observed object; counts what it removed.
    fn strip(request: &mut Value) -> usize {
        let Some(request) = request.as_object_mut() else { return 0 };
        let mut objects: Vec<&mut Value> = Vec::new();
        for (key, value) in request.iter_mut() {
            match key.as_str() {
                "parent" => objects.push(value),
                "children" | "related" => {
                    for kind in value.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
                        objects.extend(kind.as_object_mut().into_iter().flat_map(|m| m.values_mut()));
                    }
                }
                _ => {}
            }
        }
        let mut stripped = 0;
        for object in objects {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                stripped += usize::from(meta.remove("managedFields").is_some());
                if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                    stripped += usize::from(annotations.remove(super::LAST_APPLIED).is_some());
                }
            }
        }
        stripped
    }

    fn decode(request: &Value) -> Result<SyncRequest, serde_json::Error> {
        serde_json::from_slice(&serde_json::to_vec(request).unwrap_or_else(|e| panic!("{e}")))
    }

    /// A request Metacontroller really sent decodes to exactly what it decodes to
    /// without its `managedFields` and last-applied annotations: nothing else is
    /// skipped or changed.
    #[test]
    fn a_captured_request_decodes_as_without_its_records() {
        let request = captured();
        let mut bare = request.clone();
        assert!(strip(&mut bare) >= 15, "the capture has managedFields and last-applied annotations");
        let with = decode(&request).unwrap_or_else(|e| panic!("{e}"));
        let without = decode(&bare).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{with:?}"), format!("{without:?}"));
        assert!(with.related.pods.values().all(|p| p.metadata.managed_fields.is_none()));
        assert!(!with.related.pods.is_empty() && !with.children.stateful_sets.is_empty());
    }

    /// `managedFields` is never built: a value k8s-openapi would refuse is skipped
    /// in the parent, a child and a related pod alike.
    #[test]
    fn managed_fields_are_skipped_unbuilt() {
        let mut request = captured();
        let pod = request["related"]["Pod.v1"].as_object_mut().and_then(|m| m.values_mut().next()).map(|p| {
            p["metadata"]["managedFields"] = json!(5);
            p.clone()
        });
        let pod = pod.unwrap_or_else(|| panic!("the capture has pods"));
        assert!(serde_json::from_value::<Pod>(pod).is_err(), "k8s-openapi refuses it on its own");
        request["parent"]["metadata"]["managedFields"] = json!({"not": "a list"});
        for stateful_set in
            request["children"]["StatefulSet.apps/v1"].as_object_mut().into_iter().flat_map(|m| m.values_mut())
        {
            stateful_set["metadata"]["managedFields"] = json!("text");
        }
        decode(&request).unwrap_or_else(|e| panic!("decoded with managedFields skipped: {e}"));
    }

    /// Only the keys at exactly their places are skipped: data, labels and
    /// metadata keys of those names elsewhere are kept, other annotations too, and a
    /// malformed field next to them is an error.
    #[test]
    fn only_the_records_at_their_places_are_skipped() {
        let mut request = captured();
        let last_applied = super::LAST_APPLIED;
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "demo",
                         "labels": {"managedFields": "label", "annotations": "label"},
                         "annotations": {last_applied: "{}", "mysqlhook.dev/store": "s3://b/p"},
                         "managedFields": [{"manager": "m"}]},
            "data": {"managedFields": "data", last_applied: "data", "metadata": "data"}});
        request["children"]["ConfigMap.v1"]["demo/x"] = config_map;
        let decoded = decode(&request).unwrap_or_else(|e| panic!("{e}"));
        let x: &ConfigMap = decoded.children.config_maps.get("demo/x").unwrap_or_else(|| panic!("demo/x"));
        let data = |k: &str| x.data.as_ref().and_then(|d| d.get(k)).map(String::as_str);
        assert_eq!(
            (data("managedFields"), data(last_applied), data("metadata")),
            (Some("data"), Some("data"), Some("data"))
        );
        assert_eq!(x.metadata.labels.as_ref().and_then(|l| l.get("managedFields")).map(String::as_str), Some("label"));
        assert!(x.metadata.managed_fields.is_none());
        let annotations = x.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["mysqlhook.dev/store"]);

        request["children"]["ConfigMap.v1"]["demo/x"]["metadata"]["name"] = json!(5);
        let error = decode(&request).err().unwrap_or_else(|| panic!("a malformed name must not decode"));
        assert!(error.to_string().contains("invalid type: integer `5`"), "{error}");
    }
}
