//! `StorageSufficient`: whether `spec.persistence.storage` holds what mongod
//! writes whatever the data: an oplog of at least 990 MB (`src/mongo/db/repl/oplog.cpp`,
//! `getNewOplogSizeBytes`: 5 % of the disk, never under 990 MB), two journal
//! files of 100 MB and up to 250 MB of diagnostic data, about 1.4 GB before
//! the first document. Under [`MIN_STORAGE_BYTES`] every member fills its
//! disk under the same writes at about the same time, and the set goes down
//! with it (docs/api-reference.md, `spec.persistence.storage`).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::conditions::{StatusReason, Verdict};
use super::StatusInput;

/// The smallest `spec.persistence.storage` reported sufficient: 4 GiB, of
/// which mongod's own files take about 1.4 GB, leaving room for data.
pub const MIN_STORAGE_BYTES: u128 = 4 << 30;

/// `StorageSufficient`: True at 4Gi or more; False says what to set.
pub(super) fn storage_sufficient<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let storage = &input.mongodb.spec.persistence.storage;
    match quantity_bytes(storage) {
        Some(bytes) if bytes < MIN_STORAGE_BYTES => {
            let message = format!(
                "spec.persistence.storage is {}: mongod keeps an oplog of at least 990 MB \
                 whatever the disk, two 100 MB journal files and up to 250 MB of diagnostic \
                 data, so under 4Gi the disk fills with little data, on every member at about \
                 the same time; set 4Gi or more (docs/runbook.md, A disk too small)",
                storage.0
            );
            Verdict::new(false, StatusReason::StorageTooSmall.as_str(), message)
        }
        _ => Verdict::new(
            true,
            StatusReason::StorageSufficient.as_str(),
            format!("spec.persistence.storage {} is 4Gi or more", storage.0),
        ),
    }
}

/// `VolumesMatchSpec`: what `grow` did this pass; when it did not run, the
/// condition as it was (or `Pending` before any).
pub(super) fn volumes_match_spec<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    if let Some(growth) = input.growth {
        let (holds, reason, message) = growth.verdict();
        return Verdict::new(holds, reason.into(), message);
    }
    match super::condition(
        input.mongodb.status.as_ref(),
        super::ConditionType::VolumesMatchSpec,
    ) {
        Some(c) => Verdict::new(c.status == "True", &c.reason, c.message.clone()),
        None => Verdict::new(
            false,
            StatusReason::Pending.as_str(),
            "the volumes have not been checked yet",
        ),
    }
}

/// A Kubernetes quantity in bytes (`1Gi`, `500M`, `1.5Gi`, `2e9`), rounded
/// down; `None` for one that is not a quantity (the CRD's pattern refuses
/// those) or is out of range.
pub fn quantity_bytes(quantity: &Quantity) -> Option<u128> {
    let text = quantity.0.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (integer, fraction) = number
        .trim_start_matches('+')
        .split_once('.')
        .unwrap_or((number.trim_start_matches('+'), ""));
    // The number as a fraction `mantissa / 10^scale`.
    let digits = format!("{integer}{fraction}");
    let mantissa: u128 = if digits.is_empty() {
        return None;
    } else {
        digits.parse().ok()?
    };
    let scale = u32::try_from(fraction.len()).ok()?;
    let (multiplier, decimal_exponent): (u128, i32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        exponent => (1, exponent.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    let exponent = decimal_exponent - i32::try_from(scale).ok()?;
    let scaled = mantissa.checked_mul(multiplier)?;
    if exponent >= 0 {
        scaled.checked_mul(10u128.checked_pow(exponent.unsigned_abs())?)
    } else {
        Some(scaled / 10u128.checked_pow(exponent.unsigned_abs())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> Option<u128> {
        quantity_bytes(&Quantity(text.to_string()))
    }

    #[test]
    fn quantities_are_read_as_kubernetes_writes_them() {
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("4Gi"), Some(MIN_STORAGE_BYTES));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("500M"), Some(500_000_000));
        assert_eq!(bytes("2e9"), Some(2_000_000_000));
        assert_eq!(bytes("4294967296"), Some(MIN_STORAGE_BYTES));
        assert_eq!(bytes("1500m"), Some(1));
        assert_eq!(bytes("lots"), None);
        assert_eq!(bytes("Gi"), None);
    }
}
