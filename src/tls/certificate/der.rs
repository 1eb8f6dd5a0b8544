//! Just enough DER to read what webpki does not expose of a certificate: its
//! validity dates and its subject, as RFC 4514 text.

use super::CheckedCertificate;
use k8s_openapi::jiff::{civil::DateTime, tz::Offset};

const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const PRINTABLE_STRING: u8 = 0x13;
const IA5_STRING: u8 = 0x16;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
/// `[0] EXPLICIT`, the version of a v2 or v3 certificate.
const VERSION: u8 = 0xa0;

/// The short names RFC 4514 gives attribute types, by DER-encoded OID.
const SHORT_NAMES: [(&[u8], &str); 7] = [
    (&[0x55, 0x04, 0x03], "CN"),
    (&[0x55, 0x04, 0x06], "C"),
    (&[0x55, 0x04, 0x07], "L"),
    (&[0x55, 0x04, 0x08], "ST"),
    (&[0x55, 0x04, 0x0a], "O"),
    (&[0x55, 0x04, 0x0b], "OU"),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19],
        "DC",
    ),
];

/// The validity and subject of the DER certificate `der`, or `None` if it
/// is not well-formed where they are read.
pub(super) fn fields(der: &[u8]) -> Option<CheckedCertificate> {
    let mut certificate = Reader(der);
    let mut tbs = Reader(Reader(certificate.next_of(SEQUENCE)?).next_of(SEQUENCE)?);
    if !certificate.0.is_empty() {
        return None;
    }
    let mut serial = tbs.next()?;
    if serial.tag == VERSION {
        serial = tbs.next()?;
    }
    if serial.tag != INTEGER {
        return None;
    }
    tbs.next_of(SEQUENCE)?; // signature algorithm
    tbs.next_of(SEQUENCE)?; // issuer
    let validity = elements(tbs.next_of(SEQUENCE)?)?;
    let [not_before, not_after] = validity.as_slice() else {
        return None;
    };
    Some(CheckedCertificate {
        not_before: time(not_before)?,
        not_after: time(not_after)?,
        subject: name(tbs.next_of(SEQUENCE)?)?,
    })
}

/// One element: its tag, its contents, and all of its encoding.
struct Tlv<'a> {
    tag: u8,
    body: &'a [u8],
    raw: &'a [u8],
}

/// Elements one after another.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// The next element, or `None` at the end or on a malformed one (a
    /// multi-byte tag, an indefinite or non-minimal length, one past the end).
    fn next(&mut self) -> Option<Tlv<'a>> {
        let [tag, first, rest @ ..] = self.0 else {
            return None;
        };
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (len, rest) = match first {
            0..=0x7f => (usize::from(*first), rest),
            0x81..=0x84 => {
                let (bytes, rest) = rest.split_at_checked(usize::from(first & 0x7f))?;
                let len = bytes
                    .iter()
                    .fold(0usize, |len, byte| len << 8 | usize::from(*byte));
                if bytes[0] == 0 || len < 0x80 {
                    return None;
                }
                (len, rest)
            }
            _ => return None,
        };
        let (body, after) = rest.split_at_checked(len)?;
        let raw = &self.0[..self.0.len() - after.len()];
        self.0 = after;
        Some(Tlv {
            tag: *tag,
            body,
            raw,
        })
    }

    /// The contents of the next element, if it has tag `tag`.
    fn next_of(&mut self, tag: u8) -> Option<&'a [u8]> {
        self.next().filter(|tlv| tlv.tag == tag).map(|tlv| tlv.body)
    }
}

/// All the elements of `der`, or `None` if one is malformed.
fn elements(der: &[u8]) -> Option<Vec<Tlv<'_>>> {
    let mut reader = Reader(der);
    let mut all = Vec::new();
    while !reader.0.is_empty() {
        all.push(reader.next()?);
    }
    Some(all)
}

/// Unix seconds of a UTCTime (`YYMMDDHHMMSSZ`, years 1950–2049) or a
/// GeneralizedTime (`YYYYMMDDHHMMSSZ`), the two forms RFC 5280 allows.
fn time(tlv: &Tlv) -> Option<i64> {
    let text = tlv.body.strip_suffix(b"Z")?;
    let (year, rest) = match (tlv.tag, text.len()) {
        (UTC_TIME, 12) => {
            let yy = number(&text[..2])?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 14) => (number(&text[..4])?, &text[4..]),
        _ => return None,
    };
    let field = |i: usize| i8::try_from(number(&rest[2 * i..2 * i + 2])?).ok();
    let at = DateTime::new(
        i16::try_from(year).ok()?,
        field(0)?,
        field(1)?,
        field(2)?,
        field(3)?,
        field(4)?,
        0,
    )
    .ok()?;
    Some(Offset::UTC.to_timestamp(at).ok()?.as_second())
}

/// The decimal number `digits`, all ASCII digits.
fn number(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0, |n, digit| {
        digit
            .is_ascii_digit()
            .then(|| n * 10 + i64::from(digit - b'0'))
    })
}

/// RFC 4514 text of a Name's contents: its RDNs last first, joined by `,`,
/// the attributes of a multi-valued RDN joined by `+`.
fn name(der: &[u8]) -> Option<String> {
    let rdns = elements(der)?
        .iter()
        .rev()
        .map(|rdn| {
            if rdn.tag != SET || rdn.body.is_empty() {
                return None;
            }
            let attributes = elements(rdn.body)?
                .iter()
                .map(attribute)
                .collect::<Option<Vec<_>>>()?;
            Some(attributes.join("+"))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(rdns.join(","))
}

/// `TYPE=value` of an AttributeTypeAndValue.
fn attribute(tlv: &Tlv) -> Option<String> {
    if tlv.tag != SEQUENCE {
        return None;
    }
    let mut pair = Reader(tlv.body);
    let oid = pair.next_of(OID)?;
    let value = pair.next()?;
    if !pair.0.is_empty() {
        return None;
    }
    let name = match SHORT_NAMES.iter().find(|(known, _)| *known == oid) {
        Some((_, short)) => (*short).to_owned(),
        None => dotted(oid)?,
    };
    let text = match value.tag {
        UTF8_STRING | PRINTABLE_STRING | IA5_STRING => std::str::from_utf8(value.body).ok(),
        _ => None,
    };
    Some(match text {
        Some(text) => format!("{name}={}", escape(text)),
        // RFC 4514: a value of any other type is `#` and the hex of its encoding.
        None => format!("{name}=#{}", hex(value.raw)),
    })
}

/// The dotted-decimal form of the DER-encoded OID `der`.
fn dotted(der: &[u8]) -> Option<String> {
    if der.last()? & 0x80 != 0 {
        return None;
    }
    let mut arcs = Vec::new();
    let mut arc: u64 = 0;
    for byte in der {
        if arc == 0 && *byte == 0x80 {
            return None;
        }
        arc = arc.checked_mul(128)? | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            arcs.push(arc);
            arc = 0;
        }
    }
    let (first, second) = match arcs[0] {
        first @ 0..80 => (first / 40, first % 40),
        first => (2, first - 80),
    };
    let rest = arcs[1..].iter().map(|arc| format!(".{arc}"));
    Some(format!("{first}.{second}{}", rest.collect::<String>()))
}

/// RFC 4514 §2.4: `value` with its special characters escaped.
fn escape(value: &str) -> String {
    let last = value.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => out.push('\\'),
            '#' if i == 0 => out.push('\\'),
            ' ' if i == 0 || i == last => out.push('\\'),
            c if c.is_ascii_control() => {
                out.push_str(&format!("\\{:02X}", c as u8));
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02X}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DER element of `tag` holding `body`.
    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let len = body.len();
        let mut out = vec![tag];
        match len {
            0..=0x7f => out.push(len as u8),
            0x80..=0xff => out.extend([0x81, len as u8]),
            _ => out.extend([0x82, (len >> 8) as u8, len as u8]),
        }
        [out, body.to_vec()].concat()
    }

    /// An attribute: its type's OID, its value's tag, its value.
    type Attribute<'a> = (&'a [u8], u8, &'a [u8]);

    /// A Name of RDNs, each of attributes.
    fn name_der(rdns: &[&[Attribute]]) -> Vec<u8> {
        let rdns: Vec<u8> = rdns
            .iter()
            .flat_map(|rdn| {
                let attributes: Vec<u8> = rdn
                    .iter()
                    .flat_map(|(oid, tag, value)| {
                        tlv(SEQUENCE, &[tlv(OID, oid), tlv(*tag, value)].concat())
                    })
                    .collect();
                tlv(SET, &attributes)
            })
            .collect();
        tlv(SEQUENCE, &rdns)
    }

    /// A certificate's DER, with `validity` and `subject` (a Name) and dummy
    /// fields elsewhere.
    fn certificate(version: bool, validity: &[u8], subject: &[u8]) -> Vec<u8> {
        let version = if version {
            tlv(VERSION, &tlv(INTEGER, &[2]))
        } else {
            Vec::new()
        };
        let tbs = [
            version,
            tlv(INTEGER, &[0x01, 0x02]),
            tlv(SEQUENCE, &tlv(OID, &[0x2a, 0x86, 0x48])),
            name_der(&[&[(&[0x55, 0x04, 0x03], UTF8_STRING, b"ca")]]),
            tlv(SEQUENCE, validity),
            subject.to_vec(),
            tlv(SEQUENCE, &[0u8; 200]), // the public key, long enough for a 2-byte length
        ]
        .concat();
        let signature = [tlv(SEQUENCE, &[]), tlv(0x03, &[0, 1])].concat();
        tlv(SEQUENCE, &[tlv(SEQUENCE, &tbs), signature].concat())
    }

    /// The RFC 4514 text of the Name `der`.
    fn subject_text(der: &[u8]) -> Option<String> {
        name(Reader(der).next_of(SEQUENCE)?)
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const OU: &[u8] = &[0x55, 0x04, 0x0b];

    fn validity(not_before: &[u8], not_after: &[u8]) -> Vec<u8> {
        [tlv(UTC_TIME, not_before), tlv(GENERALIZED_TIME, not_after)].concat()
    }

    #[test]
    fn reads_the_validity_and_the_subject_last_rdn_first() {
        let subject = name_der(&[
            &[(O, PRINTABLE_STRING, b"MongoDB")],
            &[(OU, UTF8_STRING, b"rs0")],
            &[(CN, UTF8_STRING, b"m1")],
        ]);
        let der = certificate(
            true,
            &validity(b"240229120000Z", b"20490101000001Z"),
            &subject,
        );
        assert_eq!(
            fields(&der),
            Some(CheckedCertificate {
                not_before: 1_709_208_000,
                not_after: 2_493_072_001,
                subject: "CN=m1,OU=rs0,O=MongoDB".into(),
            })
        );
        // A v1 certificate has no version field.
        let v1 = certificate(
            false,
            &validity(b"240229120000Z", b"20490101000001Z"),
            &subject,
        );
        assert_eq!(
            fields(&v1).map(|f| f.subject).as_deref(),
            Some("CN=m1,OU=rs0,O=MongoDB")
        );
    }

    #[test]
    fn utc_time_years_are_1950_to_2049() {
        let year = |utc: &[u8]| {
            time(&Tlv {
                tag: UTC_TIME,
                body: utc,
                raw: &[],
            })
        };
        assert_eq!(year(b"500101000000Z"), Some(-631_152_000));
        assert_eq!(year(b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(year(b"700101000000Z"), Some(0));
    }

    #[test]
    fn refuses_times_outside_the_rfc_5280_forms() {
        for (tag, text) in [
            (UTC_TIME, &b"2402291200Z"[..]),          // no seconds
            (UTC_TIME, b"240229120000"),              // no Z
            (UTC_TIME, b"240229120000+0100"),         // an offset
            (UTC_TIME, b"230229120000Z"),             // 29 February 2023
            (UTC_TIME, b"24022912000aZ"),             // not a digit
            (UTC_TIME, b"20240229120000Z"),           // a GeneralizedTime's text
            (GENERALIZED_TIME, b"20240229120000.5Z"), // fractions
            (INTEGER, b"240229120000Z"),
        ] {
            assert_eq!(
                time(&Tlv {
                    tag,
                    body: text,
                    raw: &[]
                }),
                None,
                "{text:?}"
            );
        }
    }

    #[test]
    fn escapes_special_characters_and_joins_multi_valued_rdns() {
        let subject = name_der(&[
            &[(O, UTF8_STRING, b"A, B+C")],
            &[(CN, UTF8_STRING, b"#m1 "), (OU, UTF8_STRING, b" x\\\"\0")],
        ]);
        assert_eq!(
            subject_text(&subject).as_deref(),
            Some(r#"CN=\#m1\ +OU=\ x\\\"\00,O=A\, B\+C"#)
        );
    }

    #[test]
    fn names_dc_and_unknown_types_by_oid_and_other_values_in_hex() {
        let email: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];
        let dc = SHORT_NAMES[6].0;
        let subject = name_der(&[
            &[(dc, IA5_STRING, b"org")],
            &[(email, IA5_STRING, b"a@b.org")],
            &[(CN, 0x1e, &[0x00, 0x6d])], // a BMPString
        ]);
        assert_eq!(
            subject_text(&subject).as_deref(),
            Some("CN=#1E02006D,1.2.840.113549.1.9.1=a@b.org,DC=org")
        );
        assert_eq!(dotted(&[0x88, 0x37, 0x01]).as_deref(), Some("2.999.1"));
        assert_eq!(dotted(&[0x2a, 0x80, 0x01]), None); // non-minimal
        assert_eq!(dotted(&[0x2a, 0x86]), None); // truncated
    }

    #[test]
    fn refuses_malformed_encodings() {
        let good = certificate(
            true,
            &validity(b"240229120000Z", b"20490101000001Z"),
            &name_der(&[&[(CN, UTF8_STRING, b"m1")]]),
        );
        assert!(fields(&good).is_some());
        // Truncated anywhere, or followed by more.
        for len in 0..good.len() {
            assert_eq!(fields(&good[..len]), None, "{len}");
        }
        assert_eq!(fields(&[good.clone(), vec![0]].concat()), None);
        // Lengths: indefinite, non-minimal long form, long form that fits short.
        assert!(Reader(&[0x04, 0x80, 0, 0]).next().is_none());
        assert!(Reader(&[0x04, 0x82, 0x00, 0x81]).next().is_none());
        assert!(Reader(&[0x04, 0x81, 0x01, 0xff]).next().is_none());
        assert!(Reader(&[0x1f, 0x01, 0x00]).next().is_none()); // a multi-byte tag
        assert_eq!(
            Reader(&[0x04, 0x01, 0xff, 0x05]).next().map(|t| t.raw),
            Some(&[0x04, 0x01, 0xff][..])
        );
        // A validity of one time, an empty RDN.
        let one_time = tlv(UTC_TIME, b"240229120000Z");
        assert_eq!(fields(&certificate(true, &one_time, &name_der(&[]))), None);
        assert_eq!(name(&tlv(SET, &[])), None);
    }
}
