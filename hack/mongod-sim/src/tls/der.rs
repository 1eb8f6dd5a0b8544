//! The little of an X.509 certificate's DER (RFC 5280 §4.1) that mongod reads
//! itself, besides what the TLS library checks: the subject's attributes (for
//! the cluster-membership rule) and the validity dates (for the check of its
//! own certificate). Chains, signatures, names and dates of peers are left to
//! rustls / webpki.

/// A DER element: its tag and its contents.
struct Element<'a> {
    tag: u8,
    contents: &'a [u8],
}

/// Why a certificate could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed certificate: {0}")]
pub struct DerError(&'static str);

/// Splits the first element off `input`.
fn next(input: &[u8]) -> Result<(Element<'_>, &[u8]), DerError> {
    let (&tag, rest) = input.split_first().ok_or(DerError("truncated"))?;
    let (&first, rest) = rest.split_first().ok_or(DerError("truncated length"))?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(DerError("bad length"));
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(DerError("element longer than its input"));
    }
    Ok((
        Element {
            tag,
            contents: &rest[..len],
        },
        &rest[len..],
    ))
}

/// The elements of a SEQUENCE's or SET's contents.
fn elements(mut input: &[u8]) -> Result<Vec<Element<'_>>, DerError> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (element, rest) = next(input)?;
        out.push(element);
        input = rest;
    }
    Ok(out)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version` of a v2/v3 certificate.
const VERSION: u8 = 0xa0;

/// The fields of `tbsCertificate` mongod reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The subject's attributes in order, as (dotted OID, value).
    pub subject: Vec<(String, String)>,
    /// notBefore and notAfter, seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
}

/// Reads the subject and validity of a DER certificate.
pub fn certificate_info(der: &[u8]) -> Result<CertificateInfo, DerError> {
    let (certificate, _) = next(der)?;
    let (tbs, _) = next(certificate.contents)?;
    let mut fields = elements(tbs.contents)?.into_iter();
    let first = fields.next().ok_or(DerError("empty tbsCertificate"))?;
    if first.tag == VERSION {
        // The serial number follows the version.
        fields.next().ok_or(DerError("no serial"))?;
    }
    // signature, issuer, validity, subject.
    let _signature = fields.next();
    let _issuer = fields.next();
    let validity = fields.next().ok_or(DerError("no validity"))?;
    let subject = fields.next().ok_or(DerError("no subject"))?;
    if validity.tag != SEQUENCE || subject.tag != SEQUENCE {
        return Err(DerError("validity or subject is not a SEQUENCE"));
    }
    let times = elements(validity.contents)?;
    let [not_before, not_after] = times.as_slice() else {
        return Err(DerError("validity is not two times"));
    };
    Ok(CertificateInfo {
        subject: name(subject.contents)?,
        not_before: time(not_before)?,
        not_after: time(not_after)?,
    })
}

/// A `Name`: a SEQUENCE of RDN SETs of (OID, value) SEQUENCEs.
fn name(contents: &[u8]) -> Result<Vec<(String, String)>, DerError> {
    let mut out = Vec::new();
    for rdn in elements(contents)? {
        if rdn.tag != SET {
            return Err(DerError("an RDN is not a SET"));
        }
        for attribute in elements(rdn.contents)? {
            let parts = elements(attribute.contents)?;
            let [oid, value] = parts.as_slice() else {
                return Err(DerError("an attribute is not (type, value)"));
            };
            if oid.tag != OID {
                return Err(DerError("an attribute type is not an OID"));
            }
            out.push((
                dotted(oid.contents)?,
                String::from_utf8_lossy(value.contents).into_owned(),
            ));
        }
    }
    Ok(out)
}

/// An OID's contents in dotted form.
fn dotted(contents: &[u8]) -> Result<String, DerError> {
    let (&first, rest) = contents.split_first().ok_or(DerError("empty OID"))?;
    let mut arcs = vec![(first / 40) as u64, (first % 40) as u64];
    let mut value = 0u64;
    for &b in rest {
        value = (value << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            arcs.push(value);
            value = 0;
        }
    }
    Ok(arcs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("."))
}

/// A UTCTime (`YYMMDDHHMMSSZ`, years 1950–2049) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`), as seconds since the epoch.
fn time(element: &Element) -> Result<i64, DerError> {
    let text = std::str::from_utf8(element.contents).map_err(|_| DerError("time not ASCII"))?;
    let digits = text.strip_suffix('Z').ok_or(DerError("time not in UTC"))?;
    let (year, rest) = match element.tag {
        UTC_TIME if digits.len() == 12 => {
            let yy: i64 = digits[..2].parse().map_err(|_| DerError("bad year"))?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &digits[2..])
        }
        GENERALIZED_TIME if digits.len() == 14 => (
            digits[..4].parse().map_err(|_| DerError("bad year"))?,
            &digits[4..],
        ),
        _ => return Err(DerError("unsupported time")),
    };
    let field = |i: usize| -> Result<i64, DerError> {
        rest[i..i + 2]
            .parse()
            .map_err(|_| DerError("bad time field"))
    };
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A DER element with `tag` around `contents`.
    pub(crate) fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if contents.len() < 0x80 {
            out.push(contents.len() as u8);
        } else {
            let len = (contents.len() as u16).to_be_bytes();
            out.extend([0x82, len[0], len[1]]);
        }
        out.extend(contents);
        out
    }

    /// An attribute (OID contents, UTF8String value) in its own RDN.
    fn rdn(oid: &[u8], value: &str) -> Vec<u8> {
        let attribute = [tlv(OID, oid), tlv(0x0c, value.as_bytes())].concat();
        tlv(SET, &tlv(SEQUENCE, &attribute))
    }

    /// A certificate skeleton whose subject is `O=org, OU=unit, CN=name`.
    pub(crate) fn certificate(org: &str, unit: &str, cn: &str) -> Vec<u8> {
        let subject = [
            rdn(&[0x55, 0x04, 0x0a], org),
            rdn(&[0x55, 0x04, 0x0b], unit),
            rdn(&[0x55, 0x04, 0x03], cn),
        ]
        .concat();
        let validity = [
            tlv(UTC_TIME, b"240229120000Z"),
            tlv(GENERALIZED_TIME, b"20500101000000Z"),
        ]
        .concat();
        let tbs = [
            tlv(VERSION, &tlv(0x02, &[2])),
            tlv(0x02, &[1]),
            tlv(
                SEQUENCE,
                &tlv(OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]),
            ),
            tlv(SEQUENCE, &rdn(&[0x55, 0x04, 0x03], "ca")),
            tlv(SEQUENCE, &validity),
            tlv(SEQUENCE, &subject),
        ]
        .concat();
        tlv(SEQUENCE, &tlv(SEQUENCE, &tbs))
    }

    #[test]
    fn the_subject_and_the_validity_are_read() {
        let info = certificate_info(&certificate("MongoDB", "rs0", "m1")).unwrap();
        assert_eq!(
            info.subject,
            [
                ("2.5.4.10".to_string(), "MongoDB".to_string()),
                ("2.5.4.11".to_string(), "rs0".to_string()),
                ("2.5.4.3".to_string(), "m1".to_string()),
            ]
        );
        assert_eq!(info.not_before, 1_709_208_000, "2024-02-29T12:00:00Z");
        assert_eq!(info.not_after, 2_524_608_000, "2050-01-01T00:00:00Z");
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let der = certificate("o", "u", "c");
        for len in 0..der.len() {
            assert!(certificate_info(&der[..len]).is_err(), "length {len}");
        }
        assert_eq!(dotted(&[0x2a, 0x86, 0x48]).unwrap(), "1.2.840");
    }
}
