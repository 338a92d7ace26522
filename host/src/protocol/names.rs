//! The name rule: which characters a name may not hold, wherever a name
//! enters the host (a group, a member, a topic, a rack, a param key, an
//! assignor reference, a module's name and version). It owns only the
//! characters; each caller keeps its own length limit and turns a
//! [`NameRefused`] into its layer's error, naming the field.

/// A character a name must not hold: a control character (NUL, CR, …),
/// or a Unicode format character (Cf: the bidirectional embeddings,
/// overrides and isolates, zero-width characters, the BOM, tags), which
/// shows a name as another one.
pub fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2
            | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
            | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

/// A name refused by the rule: the field it came in, the name and the
/// first character the rule refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} {name:?} holds {found:?} (U+{code:04X}): control, format and bidirectional \
     characters are refused",
    code = *found as u32
)]
pub struct NameRefused {
    pub what: String,
    pub name: String,
    pub found: char,
}

/// Refuses `name`, which came in as `what` (`"topic name"`, `"rack"`, …),
/// if it holds an [`is_invisible`] character.
pub fn check_name(what: &str, name: &str) -> Result<(), NameRefused> {
    match name.chars().find(|&c| is_invisible(c)) {
        Some(found) => Err(NameRefused {
            what: what.to_owned(),
            name: name.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::core::{Coordinator, Heartbeat, ProtocolError};
    use crate::protocol::group::{GroupConfig, TopicConfig};

    #[test]
    fn control_format_and_bidirectional_characters_are_refused() {
        for bad in [
            "a\u{0}b",
            "a\nb",
            "a\rb",
            "a\u{7f}b",
            "a\u{202e}b",
            "a\u{200b}b",
            "\u{feff}a",
        ] {
            let refused = check_name("topic name", bad).unwrap_err();
            let message = refused.to_string();
            assert!(message.starts_with("topic name "), "{message}");
            assert!(message.contains("are refused"), "{message}");
        }
        let refused = check_name("rack", "r\u{202e}x").unwrap_err();
        assert_eq!(refused.found, '\u{202e}');
        assert!(refused.to_string().contains("U+202E"), "{refused}");
    }

    fn orders() -> GroupConfig {
        GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions: 4,
        }])
    }

    /// The message of a refusal as invalid input.
    fn invalid<T: std::fmt::Debug>(result: Result<T, ProtocolError>) -> String {
        match result {
            Err(ProtocolError::Invalid(message)) => message,
            other => panic!("refused as invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_config_with_an_invisible_name_is_refused_naming_the_field() {
        let mut core = Coordinator::new(7);
        let mut topic = orders();
        topic.topics[0].name = "a\u{0}b".into();
        let mut key = orders();
        key.params.insert("k\n".into(), "1".into());
        let mut assignor = orders();
        assignor.assignor = "ra\u{202e}nge".into();
        let mut fallback = orders();
        fallback.fallback_assignor = Some("range\r".into());
        for (config, field) in [
            (topic, "topic name "),
            (key, "param key "),
            (assignor, "assignor "),
            (fallback, "fallback_assignor "),
        ] {
            let message = invalid(core.configure("g", config, 0));
            assert!(message.starts_with(field), "{message}");
            assert!(core.group("g").is_none(), "nothing changed");
        }
        let mut value = orders();
        value.params.insert("note".into(), "two\nlines".into());
        assert!(core.configure("g", value, 0).is_ok(), "a value is any text");
    }

    #[test]
    fn a_join_with_an_invisible_topic_or_rack_is_refused_naming_the_field() {
        let mut core = Coordinator::new(7);
        core.configure("g", orders(), 0).unwrap();
        let topic = Heartbeat::join("g", Some("m"), vec!["a\nb".into()]);
        let mut rack = Heartbeat::join("g", Some("m"), vec!["orders".into()]);
        rack.rack = Some("r\nx".into());
        let name = Heartbeat::join("g", Some("m\u{202e}"), vec!["orders".into()]);
        for (request, field) in [
            (topic, "topic name "),
            (rack, "rack "),
            (name, "member name "),
        ] {
            let message = invalid(core.heartbeat(&request, 1));
            assert!(message.starts_with(field), "{message}");
        }
        assert!(core.group("g").unwrap().members.is_empty(), "nobody joined");
    }

    #[test]
    fn visible_names_pass_in_any_script() {
        for good in [
            "orders",
            "az-1",
            "commandes_été",
            "заказы",
            "注文",
            "a b",
            "k=v",
            "😀",
        ] {
            assert_eq!(check_name("topic name", good), Ok(()));
        }
    }
}
