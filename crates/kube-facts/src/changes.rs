//! Turns a trimmed watch's events into the objects whose checked content changed: an update that
//! only moves the resourceVersion (a status write the trim dropped, a DaemonSet's rollout counters
//! during a scale-up) re-checks nothing. Deletions always pass. Does no IO.

use futures::{Stream, StreamExt, stream};
use kube::Resource;
use kube::runtime::watcher;
use std::collections::HashMap;
use std::fmt::{self, Debug, Write as _};
use std::hash::{DefaultHasher, Hasher};

type ObjectKey = (Option<String>, Option<String>);

fn key_of<K: Resource>(object: &K) -> ObjectKey {
    let meta = object.meta();
    (meta.namespace.clone(), meta.name.clone())
}

/// Feeds formatted text straight into a hasher, without building the string.
struct HashWriter(DefaultHasher);

impl fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

/// A hash of everything the trimmed object holds but its resourceVersion, which every write moves.
/// `Debug` is what every watched kind (and `DeserializeGuard`) has; its output is deterministic
/// for the same content (k8s-openapi's maps are ordered).
fn fingerprint<K: Resource + Debug>(object: &mut K) -> u64 {
    let version = object.meta_mut().resource_version.take();
    let mut writer = HashWriter(DefaultHasher::new());
    // Writing into a hasher cannot fail.
    let _ = write!(writer, "{object:?}");
    object.meta_mut().resource_version = version;
    writer.0.finish()
}

/// What each object last looked like, and the picture a relist is building.
#[derive(Default)]
struct Seen {
    current: HashMap<ObjectKey, u64>,
    relisting: Option<HashMap<ObjectKey, u64>>,
}

impl Seen {
    /// Whether `object` differs from what was last seen of it; remembers it either way.
    fn changed<K: Resource + Debug>(&mut self, object: &mut K, relisted: bool) -> bool {
        let key = key_of(object);
        let print = fingerprint(object);
        let changed = self.current.get(&key) != Some(&print);
        match self.relisting.as_mut().filter(|_| relisted) {
            Some(relisting) => {
                relisting.insert(key, print);
            }
            None => {
                self.current.insert(key, print);
            }
        }
        changed
    }
}

/// The objects of `events` that were added, deleted, or changed in what the trim kept. A relist
/// passes on only the objects that differ from before it, and forgets the ones it no longer
/// lists (so the memory is bounded by the objects that exist).
pub fn changed_objects<K, S>(events: S) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Debug + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut seen = Seen::default();
    events.flat_map(move |event| {
        let passed = match event {
            Err(error) => Some(Err(error)),
            Ok(watcher::Event::Init) => {
                seen.relisting = Some(HashMap::new());
                None
            }
            Ok(watcher::Event::InitApply(mut object)) => {
                seen.changed(&mut object, true).then_some(Ok(object))
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(relisted) = seen.relisting.take() {
                    seen.current = relisted;
                }
                None
            }
            Ok(watcher::Event::Apply(mut object)) => {
                seen.changed(&mut object, false).then_some(Ok(object))
            }
            Ok(watcher::Event::Delete(object)) => {
                seen.current.remove(&key_of(&object));
                Some(Ok(object))
            }
        };
        stream::iter(passed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;
    use watcher::Event;

    fn map(name: &str, version: &str, value: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("kube-system".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("key".to_owned(), value.to_owned())])),
            ..Default::default()
        }
    }

    /// (name, resourceVersion) of each object passed on.
    fn passed(events: Vec<Event<ConfigMap>>) -> Vec<(String, String)> {
        let stream = changed_objects(stream::iter(events.into_iter().map(Ok)));
        block_on(stream.collect::<Vec<_>>())
            .into_iter()
            .map(|r| {
                let object = r.expect("no errors were sent");
                (
                    object.metadata.name.unwrap_or_default(),
                    object.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect()
    }

    fn pair(name: &str, version: &str) -> (String, String) {
        (name.to_owned(), version.to_owned())
    }

    #[test]
    fn an_update_that_only_moves_the_resource_version_is_dropped() {
        let got = passed(vec![
            Event::Apply(map("a", "1", "x")),
            Event::Apply(map("a", "2", "x")),
            Event::Apply(map("a", "3", "y")),
        ]);
        assert_eq!(got, vec![pair("a", "1"), pair("a", "3")]);
    }

    #[test]
    fn objects_are_compared_with_their_own_past_only() {
        let got = passed(vec![
            Event::Apply(map("a", "1", "x")),
            Event::Apply(map("b", "2", "x")),
        ]);
        assert_eq!(got, vec![pair("a", "1"), pair("b", "2")]);
    }

    #[test]
    fn a_deletion_passes_and_a_re_creation_with_the_same_content_passes_too() {
        let got = passed(vec![
            Event::Apply(map("a", "1", "x")),
            Event::Delete(map("a", "2", "x")),
            Event::Apply(map("a", "3", "x")),
        ]);
        assert_eq!(got, vec![pair("a", "1"), pair("a", "2"), pair("a", "3")]);
    }

    #[test]
    fn a_relist_passes_only_what_changed_and_forgets_what_it_no_longer_lists() {
        let got = passed(vec![
            Event::Init,
            Event::InitApply(map("a", "1", "x")),
            Event::InitApply(map("b", "1", "x")),
            Event::InitDone,
            // The watch is lost; while it was, b was deleted and a changed.
            Event::Init,
            Event::InitApply(map("a", "5", "y")),
            Event::InitDone,
            // b comes back as it was: after the relist it counts as new.
            Event::Apply(map("b", "6", "x")),
            Event::Apply(map("a", "7", "y")),
        ]);
        assert_eq!(
            got,
            vec![
                pair("a", "1"),
                pair("b", "1"),
                pair("a", "5"),
                pair("b", "6")
            ]
        );
    }

    #[test]
    fn errors_pass_through() {
        let events: Vec<Result<Event<ConfigMap>, watcher::Error>> = vec![
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Apply(map("a", "1", "x"))),
        ];
        let got = block_on(changed_objects(stream::iter(events)).collect::<Vec<_>>());
        assert!(matches!(got[0], Err(watcher::Error::NoResourceVersion)));
        assert!(got[1].is_ok());
        assert_eq!(got.len(), 2);
    }
}
