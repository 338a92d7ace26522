//! The routing vectors (`clients/conformance/routes/`) through the
//! router's index: every lookup of `table.json`, its freshness cases, the
//! unknown topic and the partition past the count; and every key of
//! `murmur2.json` to the partition a lookup picks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use assignd_wire::{RoutesBody, TaskRanges};
use serde_json::Value;

use super::*;

fn vectors(name: &str) -> Value {
    let path = format!(
        "{}/../clients/conformance/routes/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn ids(owners: &[Arc<RouteOwner>]) -> Vec<&str> {
    owners.iter().map(|o| o.member_id.as_str()).collect()
}

fn id(owner: &Option<Arc<RouteOwner>>) -> Option<&str> {
    owner.as_ref().map(|o| o.member_id.as_str())
}

#[test]
fn every_lookup_of_the_vector_table_reads_from_the_index() {
    let vectors = vectors("table.json");
    let body: RoutesBody = serde_json::from_value(vectors["table"].clone()).unwrap();
    let sent = Instant::now();
    let table = RouteTable::new(body, sent, Duration::ZERO);
    let lookups = vectors["lookups"].as_array().unwrap();
    assert!(lookups.len() > 20);
    for lookup in lookups {
        let topic = lookup["topic"].as_str().unwrap();
        let route = match lookup["key"].as_str() {
            Some(key) => table.owner_of_at(topic, key, sent).unwrap(),
            None => {
                let partition = lookup["partition"].as_u64().unwrap() as u32;
                table.owner_of_partition_at(topic, partition, sent).unwrap()
            }
        };
        let names = |key: &str| -> Vec<&str> {
            let list = lookup[key].as_array().unwrap();
            list.iter().map(|v| v.as_str().unwrap()).collect()
        };
        assert_eq!(&*route.topic, topic, "{lookup}");
        assert_eq!(u64::from(route.partition), lookup["partition"], "{lookup}");
        assert_eq!(id(&route.owner), lookup["owner"].as_str(), "{lookup}");
        assert_eq!(
            id(&route.moving_to),
            lookup["moving_to"].as_str(),
            "{lookup}"
        );
        assert_eq!(ids(&route.learners), names("learners"), "{lookup}");
        assert_eq!(ids(&route.standbys), names("standbys"), "{lookup}");
        assert_eq!((route.epoch, route.fresh), (42, true));
    }
    // The owner carries what the member published.
    let route = table.owner_of_partition("orders", 0).unwrap();
    let owner = route.owner.unwrap();
    assert_eq!(owner.endpoint.as_deref(), Some("http://10.0.0.5:8080"));
    assert_eq!(owner.member_name.as_deref(), Some("worker-a"));
    assert_eq!(owner.metadata.get("zone").map(String::as_str), Some("a"));
}

#[test]
fn a_table_is_fresh_until_its_bound_counted_from_the_send_time() {
    let vectors = vectors("table.json");
    let body: RoutesBody = serde_json::from_value(vectors["table"].clone()).unwrap();
    let origin = Instant::now();
    let at = |ms: &Value| origin + Duration::from_millis(ms.as_u64().unwrap());
    let cases = vectors["freshness"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let table = RouteTable::new(body.clone(), at(&case["sent_at_ms"]), Duration::ZERO);
        let now = at(&case["now_ms"]);
        assert_eq!(
            table.is_fresh_at(now),
            case["fresh"].as_bool().unwrap(),
            "{case}"
        );
        let route = table.owner_of_partition_at("orders", 0, now).unwrap();
        assert_eq!(route.fresh, table.is_fresh_at(now));
        assert_eq!(route.fresh_until, table.fresh_until());
        // A later answer of the same epoch moves the bound on; an earlier
        // one does not move it back.
        let later = table.confirmed(now, Duration::ZERO);
        assert!(later.is_fresh_at(now) || body.valid_ms == 0);
        let earlier = table.confirmed(origin, Duration::ZERO);
        assert_eq!(earlier.sent_at(), table.sent_at());
    }
}

#[test]
fn the_bound_counts_from_the_send_time_plus_the_hosts_wait() {
    let mut body: RoutesBody = serde_json::from_value(vectors("table.json")["table"].clone())
        .expect("the vector table decodes");
    body.valid_ms = 2_000;
    let sent = Instant::now();
    let waited = Duration::from_millis(1_500);
    let table = RouteTable::new(body, sent, waited);
    assert_eq!(table.fresh_until() - sent, Duration::from_millis(3_500));
    assert!(table.is_fresh_at(sent + Duration::from_millis(3_499)));
    assert!(!table.is_fresh_at(sent + Duration::from_millis(3_500)));
    let route = table
        .owner_of_partition_at("orders", 0, sent + Duration::from_millis(3_000))
        .unwrap();
    assert!(route.fresh);
    // A confirmation sent later but read sooner (it waited less) keeps the
    // later bound; one read later moves it on.
    let sooner = table.confirmed(sent + Duration::from_millis(100), Duration::ZERO);
    assert_eq!(sooner.fresh_until(), table.fresh_until());
    let later = table.confirmed(sent + Duration::from_millis(100), waited);
    assert_eq!(later.fresh_until() - sent, Duration::from_millis(3_600));
    assert_eq!(later.waited(), waited);
}

#[test]
fn an_unknown_topic_and_a_partition_past_the_count_are_errors() {
    let vectors = vectors("table.json");
    let body: RoutesBody = serde_json::from_value(vectors["table"].clone()).unwrap();
    let table = RouteTable::new(body, Instant::now(), Duration::ZERO);
    let unknown = vectors["unknown_topic"].as_str().unwrap();
    assert_eq!(
        table.owner_of(unknown, "k"),
        Err(RouteError::UnknownTopic(unknown.to_owned()))
    );
    assert_eq!(
        table.owner_of_partition(unknown, 0),
        Err(RouteError::UnknownTopic(unknown.to_owned()))
    );
    let topic = vectors["partition_out_of_range"][0].as_str().unwrap();
    let partition = vectors["partition_out_of_range"][1].as_u64().unwrap() as u32;
    assert_eq!(
        table.owner_of_partition(topic, partition),
        Err(RouteError::PartitionOutOfRange {
            topic: topic.to_owned(),
            partition,
            partitions: 12,
        })
    );
}

#[test]
fn every_key_of_the_murmur2_vectors_goes_to_kafkas_partition() {
    let vectors = vectors("murmur2.json");
    let cases = vectors["cases"].as_array().unwrap();
    let counts: Vec<u32> = cases[0]["partitions"]
        .as_object()
        .unwrap()
        .keys()
        .map(|count| count.parse().unwrap())
        .collect();
    let body = RoutesBody {
        topics: counts.iter().map(|n| (format!("t{n}"), *n)).collect(),
        ..RoutesBody::default()
    };
    let table = RouteTable::new(body, Instant::now(), Duration::ZERO);
    for case in cases {
        let hex = case["key_hex"].as_str().unwrap();
        let key: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(i64::from(assignd_wire::murmur2(&key)), case["murmur2"]);
        for (count, partition) in case["partitions"].as_object().unwrap() {
            let route = table.owner_of(&format!("t{count}"), &key).unwrap();
            assert_eq!(u64::from(route.partition), *partition, "{case}");
            if let Some(text) = case["key"].as_str() {
                let by_text = table.owner_of(&format!("t{count}"), text).unwrap();
                assert_eq!(
                    by_text.partition, route.partition,
                    "a string is its UTF-8 bytes"
                );
            }
            assert_eq!(route.owner, None, "nobody owns a task of an empty table");
        }
    }
}

/// Task lists past the topics' counts, ranges that overrun the count, and
/// members the member list lacks read without a panic.
#[test]
fn a_table_that_names_more_than_its_topics_have_reads_what_it_can() {
    let range = |topic: &str, first: u32, last: u32| assignd_wire::TaskRange {
        topic: topic.into(),
        first,
        last,
    };
    let body = RoutesBody {
        epoch: 1,
        topics: BTreeMap::from([("a".to_owned(), 3), ("empty".to_owned(), 0)]),
        active: BTreeMap::from([(
            "ghost".to_owned(),
            TaskRanges(vec![
                range("a", 1, 9),
                range("b", 0, 4),
                range("empty", 0, 0),
            ]),
        )]),
        ..RoutesBody::default()
    };
    let table = RouteTable::new(body, Instant::now(), Duration::ZERO);
    let owner = |p| id(&table.owner_of_partition("a", p).unwrap().owner).map(str::to_owned);
    assert_eq!(
        [owner(0), owner(1), owner(2)],
        [None, Some("ghost".into()), Some("ghost".into())]
    );
    let ghost = table.owner_of_partition("a", 2).unwrap().owner.unwrap();
    assert_eq!((ghost.endpoint.as_ref(), ghost.metadata.len()), (None, 0));
    assert!(matches!(
        table.owner_of("empty", "k"),
        Err(RouteError::PartitionOutOfRange { partitions: 0, .. })
    ));
}
