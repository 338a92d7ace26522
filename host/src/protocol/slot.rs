//! [`Slot`]: a member's place in its group, and the one place that knows how
//! a slot key is spelled.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// A member's place in its group: one worker identity. A static member's
/// slot is its name and outlives its incarnations (`static:{name}` on the
/// wire and in the log); a dynamic member's slot is its member id.
///
/// It is a string on the wire, in the log and in the assignor's input, so
/// it dereferences to one and a map keyed by slots can be read with a
/// `&str`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Slot(String);

impl Slot {
    /// What a static member's slot key starts with. Member names cannot
    /// contain `:`, and the host issues member ids without one, so the two
    /// kinds never collide.
    const NAMED_PREFIX: &'static str = "static:";

    /// The slot of the static member `name`.
    pub fn named(name: &str) -> Self {
        Slot(format!("{}{name}", Self::NAMED_PREFIX))
    }

    /// The slot of the dynamic member `member_id`.
    pub fn dynamic(member_id: &str) -> Self {
        Slot(member_id.to_owned())
    }

    /// A slot key as a client or an admin spelled it (a path segment, a
    /// preview's answer).
    pub fn from_key(key: &str) -> Self {
        Slot(key.to_owned())
    }

    /// The static member name, if this is a static member's slot.
    pub fn name(&self) -> Option<&str> {
        self.0.strip_prefix(Self::NAMED_PREFIX)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Slot {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Slot {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Slot {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// As the string it is: messages quote a slot as `"static:a"`.
impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Slot {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for Slot {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl PartialEq<&str> for Slot {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A slot key as written (tests, and keys read back from the wire).
impl From<&str> for Slot {
    fn from(key: &str) -> Self {
        Slot::from_key(key)
    }
}

impl From<Slot> for String {
    fn from(slot: Slot) -> String {
        slot.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_slot_gives_its_name_back_and_a_dynamic_one_has_none() {
        let named = Slot::named("worker-a");
        assert_eq!(named, "static:worker-a");
        assert_eq!(named.name(), Some("worker-a"));
        let dynamic = Slot::dynamic("m-7");
        assert_eq!(dynamic, "m-7");
        assert_eq!(dynamic.name(), None);
    }

    #[test]
    fn a_slot_is_a_plain_string_in_json_and_in_the_log() {
        let slot = Slot::named("w");
        assert_eq!(serde_json::to_string(&slot).unwrap(), "\"static:w\"");
        let bytes = postcard::to_allocvec(&slot).unwrap();
        assert_eq!(bytes, postcard::to_allocvec("static:w").unwrap());
        assert_eq!(postcard::from_bytes::<Slot>(&bytes).unwrap(), slot);
    }

    #[test]
    fn messages_quote_a_slot_as_its_key() {
        assert_eq!(format!("{:?}", Slot::named("a")), "\"static:a\"");
        assert_eq!(Slot::named("a").to_string(), "static:a");
    }
}
