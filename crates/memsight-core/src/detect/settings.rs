//! Advises allocator settings — `expandable_segments`, `max_split_size_mb`,
//! `garbage_collection_threshold` — only where another finding supports it, and never one the
//! file's `allocator_settings` show already on. Files without `allocator_settings` (`torch_npu`,
//! `PyTorch` before 2.3) get the advice with "unless already set". Expandable segments seen in use
//! (mapped pages, expandable segments in the pool) count as on. Each suggestion names the
//! findings it rests on.

use crate::model::{SettingValue, Snapshot};
use crate::units::format_bytes;

use super::{Finding, FindingKind, Severity};

/// What the file says about the allocator's configuration.
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per setting the file may show"
)]
struct Configured {
    known: bool,
    expandable_segments: bool,
    max_split_size: bool,
    garbage_collection: bool,
}

fn configured(snapshot: &Snapshot) -> Configured {
    let expandable_in_use = snapshot
        .devices
        .iter()
        .any(|d| super::stall::uses_expandable_segments(snapshot, d));
    let setting = |name: &str| {
        snapshot
            .allocator_settings
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    };
    let conf =
        match setting("PYTORCH_CUDA_ALLOC_CONF").or_else(|| setting("PYTORCH_NPU_ALLOC_CONF")) {
            Some(SettingValue::Text(text)) => text.to_ascii_lowercase(),
            _ => String::new(),
        };
    let positive = |v: Option<&SettingValue>| match v {
        Some(SettingValue::Bool(b)) => *b,
        Some(SettingValue::Int(i)) => *i > 0,
        Some(SettingValue::Float(f)) => *f > 0.0,
        _ => false,
    };
    Configured {
        known: !snapshot.allocator_settings.is_empty(),
        expandable_segments: expandable_in_use
            || positive(setting("expandable_segments"))
            || conf.contains("expandable_segments:true"),
        max_split_size: positive(setting("max_split_size")) || conf.contains("max_split_size_mb"),
        garbage_collection: positive(setting("garbage_collection_threshold"))
            || conf.contains("garbage_collection_threshold"),
    }
}

/// Setting advice backed by `findings` (the other detectors' results for this file).
pub fn detect(snapshot: &Snapshot, findings: &[Finding]) -> Vec<Finding> {
    let have = configured(snapshot);
    let of_kind = |kind: FindingKind| findings.iter().filter(move |f| f.kind == kind);
    // A fragmentation note (a small gap) is no reason to change settings; a warning is.
    let fragmentation: Vec<&Finding> = of_kind(FindingKind::Fragmentation)
        .filter(|f| f.severity >= Severity::Warning)
        .chain(
            of_kind(FindingKind::Oom)
                .filter(|f| f.summary.contains(super::oom::FRAGMENTATION_CAUSE)),
        )
        .collect();
    // Explicit empty_cache() calls are findings of their own kind: fixed in the program, not by
    // a setting.
    let stalls: Vec<&Finding> = of_kind(FindingKind::AllocatorStall).collect();
    let named = |found: &[&Finding]| {
        found
            .iter()
            .map(|f| format!("\"{}\" on device {}", f.title, f.device))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rests_on_fragmentation = format!("rests on {}", named(&fragmentation));
    let rests_on_stalls = format!("rests on {}", named(&stalls));
    let rests_on_both = named(
        &fragmentation
            .iter()
            .chain(&stalls)
            .copied()
            .collect::<Vec<_>>(),
    );
    let Some(first) = fragmentation
        .iter()
        .chain(&stalls)
        .min_by_key(|f| (f.device, f.events))
    else {
        return Vec::new();
    };
    let variable = if snapshot.is_npu() {
        "PYTORCH_NPU_ALLOC_CONF"
    } else {
        "PYTORCH_CUDA_ALLOC_CONF"
    };
    let mut advice: Vec<String> = Vec::new();
    if !have.expandable_segments {
        advice.push(format!(
            "{variable}=expandable_segments:True: segments grow in place, so free memory is not split into \
             pieces and the allocator never has to free everything and retry (rests on {rests_on_both})"
        ));
    }
    if !fragmentation.is_empty() && !have.max_split_size && !have.expandable_segments {
        advice.push(format!(
            "max_split_size_mb:N (N a little above your typical large request): large cached blocks stay whole \
             for large requests instead of being split by small ones ({rests_on_fragmentation})"
        ));
    }
    if !stalls.is_empty() && !have.garbage_collection {
        advice.push(format!(
            "garbage_collection_threshold:0.8: unused cached blocks are released gradually before the pool \
             fills, instead of all at once in a stall ({rests_on_stalls})"
        ));
    }
    if advice.is_empty() {
        return Vec::new();
    }
    let freed: u64 = stalls.iter().map(|f| f.bytes).sum();
    let grown: u64 = fragmentation.iter().map(|f| f.bytes).sum();
    let mut evidence = Vec::new();
    if !fragmentation.is_empty() {
        evidence.push(format!(
            "{} fragmentation finding(s) ({} reserved or requested)",
            fragmentation.len(),
            format_bytes(grown as i64)
        ));
    }
    if !stalls.is_empty() {
        evidence.push(format!(
            "{} allocator stall(s) ({} released)",
            stalls.len(),
            format_bytes(freed as i64)
        ));
    }
    vec![Finding {
        kind: FindingKind::Settings,
        severity: Severity::Info,
        device: first.device,
        title: format!("Settings: {} could help", advice.len()),
        summary: format!(
            "Backed by {}; the file's allocator settings {}.",
            evidence.join(" and "),
            if have.known {
                "show none of the advised options on"
            } else {
                "are not recorded, so apply these unless already set"
            }
        ),
        bytes: grown + freed,
        events: first.events,
        focus_event: first.focus_event,
        rank: None,
        time_range_us: None,
        stack: crate::model::NO_STACK,
        breakdown: Vec::new(),
        suggestion: advice.join("; "),
    }]
}

#[cfg(test)]
mod tests {
    use crate::detect::test_support::generated;
    use crate::detect::{FindingKind, analyze};
    use crate::r#gen::Scenario;

    #[test]
    fn stalls_bring_advice_and_settings_already_on_are_not_advised() {
        let (_, loaded) = generated(Scenario::Stall, 40_000, 1);
        let findings = analyze(&loaded);
        let settings: Vec<_> = findings
            .iter()
            .filter(|f| f.kind == FindingKind::Settings)
            .collect();
        assert_eq!(settings.len(), 1, "{findings:?}");
        assert!(settings[0].suggestion.contains("expandable_segments:True"));
        assert!(
            settings[0]
                .suggestion
                .contains("garbage_collection_threshold")
        );

        // The expandable scenario records expandable_segments on: nothing to advise.
        let (_, loaded) = generated(Scenario::Expandable, 30_000, 1);
        assert!(
            analyze(&loaded)
                .iter()
                .all(|f| f.kind != FindingKind::Settings
                    || !f.suggestion.contains("expandable_segments"))
        );
    }

    #[test]
    fn no_finding_no_advice() {
        let (_, loaded) = generated(Scenario::Steady, 20_000, 1);
        assert!(
            analyze(&loaded)
                .iter()
                .all(|f| f.kind != FindingKind::Settings)
        );
    }
}
