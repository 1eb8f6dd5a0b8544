//! Kubernetes resource quantities (`1Gi`, `500M`, `1.5`, `2e3`), as
//! `k8s.io/apimachinery/pkg/api/resource` parses, compares and adds them
//! (kubernetes/kubernetes
//! `staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go`
//! `parseQuantityString`, `ParseQuantity`, `Quantity.Cmp`, `Add`, `Sub`,
//! `AsInt64`, `AsApproximateFloat64`; `amount.go` `int64Amount`).
//!
//! A quantity keeps its exact value, and, like the Go type, whether it is held
//! as an `int64Amount` (`value × 10^scale`, the fast path) or as an `inf.Dec`:
//! `AsInt64` (CEL's `isInteger()`/`asInteger()`) only answers for the former.
//! Used by the CEL quantity library and by the API server simulator's
//! PersistentVolumeClaim rules.

use std::cmp::Ordering;
use std::fmt;

/// `ErrFormatWrong`.
pub const ERR_FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `ErrNumeric`.
pub const ERR_NUMERIC: &str = "unable to parse numeric part of quantity";
/// `ErrSuffix`.
pub const ERR_SUFFIX: &str = "unable to parse quantity's suffix";

/// Alignments of exponents larger than this (adding `1e100000000` to `1`) are
/// refused rather than materialized.
const MAX_ALIGNMENT: i64 = 1_000_000;

/// An exact decimal `(-1)^negative × digits × 10^exp`; `digits` are big-endian
/// decimal digits without leading or trailing zeros (zero: no digits).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Decimal {
    fn zero() -> Self {
        Decimal {
            negative: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    fn new(negative: bool, mut digits: Vec<u8>, mut exp: i64) -> Self {
        let lead = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..lead);
        while digits.last() == Some(&0) {
            digits.pop();
            exp += 1;
        }
        if digits.is_empty() {
            return Decimal::zero();
        }
        Decimal {
            negative,
            digits,
            exp,
        }
    }

    fn from_i64(value: i64, scale: i64) -> Self {
        let digits = value
            .unsigned_abs()
            .to_string()
            .bytes()
            .map(|b| b - b'0')
            .collect();
        Decimal::new(value < 0, digits, scale)
    }

    fn sign(&self) -> i64 {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    fn cmp_magnitude(&self, other: &Decimal) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let order = |d: &Decimal| d.digits.len() as i64 + d.exp;
        // Without trailing zeros, a digit string that is a prefix of the other is smaller.
        order(self)
            .cmp(&order(other))
            .then_with(|| self.digits.cmp(&other.digits))
    }

    fn cmp(&self, other: &Decimal) -> Ordering {
        match self.sign().cmp(&other.sign()) {
            Ordering::Equal if self.sign() < 0 => other.cmp_magnitude(self),
            Ordering::Equal => self.cmp_magnitude(other),
            unequal => unequal,
        }
    }

    /// Both magnitudes as little-endian digit vectors at their common exponent.
    fn aligned(&self, other: &Decimal) -> Result<(Vec<u8>, Vec<u8>, i64), String> {
        let exp = self.exp.min(other.exp);
        let widen = |d: &Decimal| -> Result<Vec<u8>, String> {
            let pad = d.exp - exp;
            if pad > MAX_ALIGNMENT {
                return Err("quantity arithmetic out of range".into());
            }
            let mut little = vec![0u8; pad as usize];
            little.extend(d.digits.iter().rev());
            Ok(little)
        };
        Ok((widen(self)?, widen(other)?, exp))
    }

    fn add(&self, other: &Decimal) -> Result<Decimal, String> {
        if other.digits.is_empty() {
            return Ok(self.clone());
        }
        if self.digits.is_empty() {
            return Ok(other.clone());
        }
        let (a, b, exp) = self.aligned(other)?;
        let big_endian = |mut little: Vec<u8>| {
            little.reverse();
            little
        };
        if self.negative == other.negative {
            let mut sum = Vec::with_capacity(a.len().max(b.len()) + 1);
            let mut carry = 0u8;
            for i in 0..a.len().max(b.len()) {
                let d = a.get(i).copied().unwrap_or(0) + b.get(i).copied().unwrap_or(0) + carry;
                sum.push(d % 10);
                carry = d / 10;
            }
            if carry > 0 {
                sum.push(carry);
            }
            return Ok(Decimal::new(self.negative, big_endian(sum), exp));
        }
        let (larger, smaller, negative) = match self.cmp_magnitude(other) {
            Ordering::Equal => return Ok(Decimal::zero()),
            Ordering::Greater => (a, b, self.negative),
            Ordering::Less => (b, a, other.negative),
        };
        let mut difference = Vec::with_capacity(larger.len());
        let mut borrow = 0i8;
        for (i, digit) in larger.iter().enumerate() {
            let mut d = *digit as i8 - smaller.get(i).copied().unwrap_or(0) as i8 - borrow;
            borrow = 0;
            if d < 0 {
                d += 10;
                borrow = 1;
            }
            difference.push(d as u8);
        }
        Ok(Decimal::new(negative, big_endian(difference), exp))
    }

    fn negated(&self) -> Decimal {
        let mut d = self.clone();
        d.negative = !d.negative && !d.digits.is_empty();
        d
    }

    /// Multiplies the magnitude by `2^power`.
    fn times_power_of_two(&self, power: u32) -> Decimal {
        let mut little: Vec<u8> = self.digits.iter().rev().copied().collect();
        for _ in 0..power {
            let mut carry = 0u8;
            for d in little.iter_mut() {
                let v = *d * 2 + carry;
                *d = v % 10;
                carry = v / 10;
            }
            if carry > 0 {
                little.push(carry);
            }
        }
        little.reverse();
        Decimal::new(self.negative, little, self.exp)
    }

    /// Rounds the magnitude up (away from zero) to a multiple of `10^-9`, as
    /// `amount.Round(amount, Nano.infScale(), inf.RoundUp)` does on the
    /// absolute value.
    fn round_up_to_nano(&self) -> Decimal {
        if self.digits.is_empty() || self.exp >= -9 {
            return self.clone();
        }
        let drop = (-9 - self.exp) as usize;
        if drop >= self.digits.len() {
            return Decimal::new(self.negative, vec![1], -9);
        }
        // The dropped digits end in a non-zero digit (no trailing zeros): round up.
        let kept = Decimal::new(false, self.digits[..self.digits.len() - drop].to_vec(), -9);
        let rounded = kept.add(&Decimal::new(false, vec![1], -9)).unwrap_or(kept);
        Decimal {
            negative: self.negative,
            ..rounded
        }
    }

    fn to_f64(&self) -> f64 {
        if self.digits.is_empty() {
            return 0.0;
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.negative { "-" } else { "" };
        format!("{sign}{digits}e{}", self.exp)
            .parse()
            .unwrap_or(f64::NAN)
    }
}

/// A parsed quantity.
#[derive(Debug, Clone)]
pub struct Quantity {
    /// The exact value.
    value: Decimal,
    /// `int64Amount{value, scale}` when the Go quantity holds one, `None` when
    /// it holds an `inf.Dec`.
    int64: Option<(i64, i32)>,
}

impl PartialEq for Quantity {
    /// `Quantity.Equal`: the same value, whatever the representation.
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    /// `Quantity.Cmp`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.value.cmp(&other.value)
    }
}

impl fmt::Display for Quantity {
    /// The exact value in plain decimal notation (not Kubernetes' canonical form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.value;
        if d.digits.is_empty() {
            return write!(f, "0");
        }
        let digits: String = d.digits.iter().map(|x| char::from(b'0' + x)).collect();
        let sign = if d.negative { "-" } else { "" };
        if d.exp > 64 {
            write!(f, "{sign}{digits}e{}", d.exp)
        } else if d.exp >= 0 {
            write!(f, "{sign}{digits}{}", "0".repeat(d.exp as usize))
        } else {
            let point = digits.len() as i64 + d.exp;
            if point > 0 {
                let (int, frac) = digits.split_at(point as usize);
                write!(f, "{sign}{int}.{frac}")
            } else {
                write!(f, "{sign}0.{}{digits}", "0".repeat((-point) as usize))
            }
        }
    }
}

/// `parseQuantityString`: (positive, value, num, denom, suffix).
fn scan(s: &str) -> Result<(bool, &str, &str, &str, &str), &'static str> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    if let Some(first) = b.first() {
        match first {
            b'-' => {
                positive = false;
                pos += 1;
            }
            b'+' => pos += 1,
            _ => {}
        }
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok((positive, "0", "0", "", ""));
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return Ok((positive, s, &s[start..], "", ""));
    }
    let num = if pos == start { "0" } else { &s[start..pos] };
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
        if pos >= end {
            return Ok((positive, s, num, denom, ""));
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos >= end {
        return Ok((positive, value, num, denom, &s[suffix_start..]));
    }
    if b[pos] == b'-' || b[pos] == b'+' {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return Ok((positive, value, num, denom, &s[suffix_start..]));
    }
    Err(ERR_FORMAT_WRONG)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// `suffixHandler.interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((10, e, Format::DecimalSI));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some((2, e, Format::BinarySI));
    }
    let rest = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))
        .filter(|r| !r.is_empty())?;
    // strconv.ParseInt(s, 10, 64) (one optional sign), then an int32 conversion.
    let parsed: i64 = rest.parse().ok()?;
    Some((10, parsed as i32, Format::DecimalExponent))
}

/// `int64Multiply`.
fn int64_multiply(a: i64, b: i64) -> Option<i64> {
    a.checked_mul(b)
}

/// `positiveScaleInt64`: `base × 10^scale`, if it fits.
fn positive_scale_int64(base: i64, scale: i32) -> Option<i64> {
    if base == 0 {
        return Some(0);
    }
    let mut value = base;
    for _ in 0..scale {
        value = int64_multiply(value, 10)?;
    }
    Some(value)
}

/// `int64Amount.Add`.
fn int64_add(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    if b.0 == 0 {
        return Some(a);
    }
    if a.0 == 0 {
        return Some(b);
    }
    match a.1.cmp(&b.1) {
        Ordering::Equal => Some((a.0.checked_add(b.0)?, a.1)),
        Ordering::Greater => {
            let c = positive_scale_int64(a.0, a.1 - b.1)?;
            Some((c.checked_add(b.0)?, b.1))
        }
        Ordering::Less => {
            let c = positive_scale_int64(b.0, b.1 - a.1)?;
            Some((a.0.checked_add(c)?, a.1))
        }
    }
}

impl Quantity {
    /// `resource.ParseQuantity`; the error is the Go error's text.
    pub fn parse(s: &str) -> Result<Quantity, &'static str> {
        if s.is_empty() {
            return Err(ERR_FORMAT_WRONG);
        }
        if s == "0" {
            return Ok(Quantity::from_int64(0, 0));
        }
        let (positive, value, num, denom, suffix) = scan(s)?;
        let (base, exponent, format) = interpret(suffix).ok_or(ERR_SUFFIX)?;

        // The int64Amount fast path.
        let digits_len = (num.len() + denom.len()) as i64;
        let (precision, mut scale, mantissa) = match format {
            Format::DecimalExponent | Format::DecimalSI => {
                (18 - digits_len, i64::from(exponent), 1i64)
            }
            Format::BinarySI if exponent >= 0 && denom.is_empty() => (
                15 - num.len() as i64 - (exponent as f32 * 3.0 / 10.0) as i64 - 1,
                0,
                1i64 << exponent,
            ),
            Format::BinarySI => (-1, 0, 1),
        };
        if precision >= 0 {
            scale -= denom.len() as i64;
            if scale >= -9 {
                let shifted: i64 = format!("{num}{denom}").parse().map_err(|_| ERR_NUMERIC)?;
                if let Some(result) = int64_multiply(shifted, mantissa) {
                    let result = if positive { result } else { -result };
                    return Ok(Quantity::from_int64(result, scale as i32));
                }
            }
        }

        // The inf.Dec path: the value as written, needing at least one digit.
        let unsigned = value.trim_start_matches(['+', '-']);
        if !unsigned.bytes().any(|b| b.is_ascii_digit()) {
            return Err(ERR_NUMERIC);
        }
        let (int_part, frac_part) = unsigned.split_once('.').unwrap_or((unsigned, ""));
        let digits: Vec<u8> = int_part
            .bytes()
            .chain(frac_part.bytes())
            .map(|b| b - b'0')
            .collect();
        let mut amount = Decimal::new(false, digits, -(frac_part.len() as i64));
        if base == 10 {
            if !amount.digits.is_empty() {
                amount.exp += i64::from(exponent);
            }
        } else {
            amount = amount.times_power_of_two(exponent as u32);
        }
        amount = amount.round_up_to_nano();
        if format == Format::BinarySI {
            let max = Decimal::from_i64(i64::MAX, 0);
            if amount.cmp_magnitude(&max) == Ordering::Greater {
                amount = max;
            }
        }
        if !positive && !amount.digits.is_empty() {
            amount.negative = true;
        }
        Ok(Quantity {
            value: amount,
            int64: None,
        })
    }

    /// `NewQuantity(value, …)` / `int64Amount{value, scale}`.
    fn from_int64(value: i64, scale: i32) -> Quantity {
        Quantity {
            value: Decimal::from_i64(value, i64::from(scale)),
            int64: Some((value, scale)),
        }
    }

    /// A quantity of `value` units (`resource.NewQuantity(value, DecimalExponent)`).
    pub fn from_i64(value: i64) -> Quantity {
        Quantity::from_int64(value, 0)
    }

    /// `Sign`: -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        self.value.sign()
    }

    /// `Add`: an int64Amount sum when both are int64Amounts and it fits, else a decimal.
    pub fn add(&self, other: &Quantity) -> Result<Quantity, String> {
        let value = self.value.add(&other.value)?;
        let int64 = match (self.int64, other.int64) {
            (Some(a), Some(b)) => int64_add(a, b),
            _ => None,
        };
        Ok(Quantity { value, int64 })
    }

    /// `Sub`, as `int64Amount.Sub` (adding the negated value) or decimally.
    pub fn sub(&self, other: &Quantity) -> Result<Quantity, String> {
        let value = self.value.add(&other.value.negated())?;
        let int64 = match (self.int64, other.int64) {
            (Some(a), Some((v, s))) => int64_add(a, (v.wrapping_neg(), s)),
            _ => None,
        };
        Ok(Quantity { value, int64 })
    }

    /// `AsInt64`: only an int64Amount with a non-negative scale whose value fits.
    pub fn as_i64(&self) -> Option<i64> {
        let (value, scale) = self.int64?;
        match scale.cmp(&0) {
            Ordering::Equal => Some(value),
            Ordering::Less => None,
            Ordering::Greater => positive_scale_int64(value, scale),
        }
    }

    /// `AsApproximateFloat64` (the nearest double; Go's may differ in the last bit
    /// for decimals).
    pub fn as_approximate_f64(&self) -> f64 {
        match self.int64 {
            Some((value, 0)) => value as f64,
            Some((value, scale)) => {
                let pow10: f64 = format!("1e{scale}").parse().unwrap_or(f64::NAN);
                value as f64 * pow10
            }
            None => self.value.to_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_what_parse_quantity_parses_to_the_same_value() {
        let same = [
            ("1Gi", "1073741824"),
            ("1.5Gi", "1610612736"),
            ("500M", "0.5G"),
            ("200M", "0.2G"),
            ("1e3", "1k"),
            ("1E3", "1000"),
            ("1E", "1000000000000000000"),
            ("+5", "5"),
            ("-0", "0"),
            ("000", "0"),
            ("1.", "1"),
            (".5", "500m"),
            ("1.G", "1G"),
            ("0.000000000001", "1n"),
            ("0.000000000001Ki", "2n"),
            ("-0.0000000001", "-1n"),
            ("10Ei", "9223372036854775807"),
        ];
        for (a, b) in same {
            assert_eq!(q(a), q(b), "{a} == {b}");
        }
        assert!(q("50M") < q("50Mi"));
        assert!(q("-1") < q("-500m"));
        assert_eq!(q("1.5Gi").to_string(), "1610612736");
        assert_eq!(q("1.05").to_string(), "1.05");
        assert_eq!(q("-250m").to_string(), "-0.25");
    }

    #[test]
    fn refuses_what_parse_quantity_refuses_with_its_errors() {
        for s in [
            "", "aoeu", "Three", "1.1.M", "1+1.0M", "1KiB", "1e3k", " 1", "1 ", "0.1am",
        ] {
            assert_eq!(Quantity::parse(s).unwrap_err(), ERR_FORMAT_WRONG, "{s:?}");
        }
        for s in [
            "200K",
            "0.1mi",
            ".5i",
            "1i",
            "1e",
            "-3.01e-",
            "1e99999999999999999999",
        ] {
            assert_eq!(Quantity::parse(s).unwrap_err(), ERR_SUFFIX, "{s:?}");
        }
        assert_eq!(Quantity::parse("Ei").unwrap_err(), ERR_NUMERIC);
    }

    #[test]
    fn integers_are_only_int64_amounts_with_a_non_negative_scale() {
        assert_eq!(q("50k").as_i64(), Some(50_000));
        assert_eq!(q("1Gi").as_i64(), Some(1 << 30));
        assert_eq!(q("50000000G").as_i64(), Some(50_000_000_000_000_000));
        assert_eq!(q("9999999999999999999999999999999999999G").as_i64(), None);
        // The Go type keeps 1.0 as 10 × 10^-1 and 1.5Gi as a decimal.
        assert_eq!(q("1.0").as_i64(), None);
        assert_eq!(q("1.5Gi").as_i64(), None);
        assert_eq!(q("0.5k").as_i64(), Some(500));
    }

    #[test]
    fn arithmetic_and_floats() {
        let sum = q("50k").add(&Quantity::from_i64(20)).unwrap();
        assert_eq!(sum, q("50020"));
        assert_eq!(sum.as_i64(), Some(50_020));
        let diff = q("50k").sub(&Quantity::from_i64(20_000)).unwrap();
        assert_eq!(diff.as_approximate_f64(), 30_000.0);
        assert_eq!(q("50k").sub(&q("20k")).unwrap(), q("30k"));
        assert_eq!(q("1.5").add(&q("1.5")).unwrap().as_i64(), None);
        assert_eq!(q("-5").sign(), -1);
        assert_eq!(q("0").sign(), 0);
        assert_eq!(q("1.5Gi").as_approximate_f64(), 1_610_612_736.0);
        assert_eq!(q("1e400").as_approximate_f64(), f64::INFINITY);
    }
}
