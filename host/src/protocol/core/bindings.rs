//! Which assignor a group is bound to: [`Coordinator::bind`] (a hot swap),
//! [`Coordinator::rollback`], and the `AssignorBound` records, which take
//! effect at the next group epoch. Binding a group's shadow ends it
//! (`shadows.rs`).

use super::{Coordinator, Output, ProtocolError, config::check_config};
use crate::protocol::group::{Binding, BindingSpec, Millis, RebalanceReason, Record};

impl Coordinator {
    /// Records a binding of `group` to `assignor` and `params`, taking
    /// effect at the next group epoch (the caller bumps it).
    pub(super) fn emit_binding(
        &mut self,
        group: &str,
        spec: BindingSpec,
        rollback_to: Option<u64>,
        now: Millis,
        out: &mut Output,
    ) {
        let current = self.group_at(group);
        let binding = Binding {
            seq: current.bindings.back().map_or(1, |b| b.seq + 1),
            assignor: spec.assignor,
            params: spec.params,
            limits: spec.limits,
            fallback: spec.fallback,
            epoch: current.group_epoch + 1,
            at_ms: now,
            rollback_to,
        };
        self.emit(
            out,
            Record::AssignorBound {
                group: group.to_owned(),
                binding,
            },
        );
    }

    /// Binds a group to another assignor or params: a hot swap. The group
    /// epoch is bumped and the new target asked for at once (no expansion
    /// wait); members reach it cooperatively like any other target. The
    /// same binding again changes nothing. The caller has checked that the
    /// assignor exists.
    pub fn bind(
        &mut self,
        name: &str,
        spec: BindingSpec,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        self.observe_time(now);
        self.deadlines.mark_group(name);
        let group = self
            .group(name)
            .ok_or_else(|| ProtocolError::UnknownGroup(name.to_owned()))?;
        let mut config = group.config.clone();
        config.set_binding(spec.clone());
        check_config(&config)?;
        let mut out = Output::default();
        if group.config.binding_spec() == spec {
            return Ok(out);
        }
        self.swap(name, spec, None, now, &mut out);
        Ok(out)
    }

    /// Binds a group back to the binding before its current one (itself a
    /// new binding, so a second rollback returns, like `cd -`).
    pub fn rollback(&mut self, name: &str, now: Millis) -> Result<Output, ProtocolError> {
        self.observe_time(now);
        self.deadlines.mark_group(name);
        let group = self
            .group(name)
            .ok_or_else(|| ProtocolError::UnknownGroup(name.to_owned()))?;
        let previous = group
            .previous_binding()
            .ok_or_else(|| ProtocolError::NoPreviousBinding(name.to_owned()))?
            .clone();
        let mut out = Output::default();
        self.swap(name, previous.spec(), Some(previous.seq), now, &mut out);
        Ok(out)
    }

    fn swap(
        &mut self,
        name: &str,
        spec: BindingSpec,
        rollback_to: Option<u64>,
        now: Millis,
        out: &mut Output,
    ) {
        let group = self.group_at(name);
        if group.bindings.is_empty() {
            // A group from a log written before bindings were recorded:
            // record the binding it has, so that it can be rolled back to.
            let current = group.config.binding_spec();
            self.emit_binding(name, current, None, now, out);
        }
        // Binding the shadow's assignor and params makes the shadow live:
        // it no longer shadows anything.
        let promotes_shadow = self
            .group_at(name)
            .shadow
            .as_ref()
            .is_some_and(|s| s.assignor == spec.assignor && s.params == spec.params);
        self.emit_binding(name, spec, rollback_to, now, out);
        if promotes_shadow {
            self.emit_shadow(name, None, out);
        }
        self.bump_urgently(name, RebalanceReason::Config, now, out);
        self.maybe_call_assignor(name, now, out);
    }
}
