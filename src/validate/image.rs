//! The MongoDB release an image runs, and whether the set can move to it.

use super::InvalidInput;

/// The first MongoDB release the operator supports: safe reconfig came with
/// 4.4, and `hello`, which every probe sends, with 4.4.2 (`isMaster` alone
/// before it).
const FIRST_SUPPORTED: (u32, u32, u32) = (4, 4, 2);

/// Refuses images whose tag names a MongoDB release older than 4.4.2. A tag
/// that names no version (`latest`, a digest, none) is accepted: the operator
/// cannot tell, and mongod itself will say. A tag without a patch
/// (`mongo:4.4`) floats to the release's newest patch and is accepted.
pub fn supported_image(image: &str) -> Result<(), InvalidInput> {
    let Some((tag, (major, minor))) = image_release(image) else {
        return Ok(());
    };
    let patch = image_patch(tag).unwrap_or(u32::MAX);
    if (major, minor, patch) < FIRST_SUPPORTED {
        return Err(InvalidInput::UnsupportedMongoDBVersion {
            image: image.to_string(),
            version: tag.to_string(),
        });
    }
    Ok(())
}

/// The patch number a `MAJOR.MINOR.PATCH[-suffix]` tag names.
fn image_patch(tag: &str) -> Option<u32> {
    let digits = tag.strip_prefix('v').unwrap_or(tag);
    let version = digits.split('-').next().unwrap_or(digits);
    let mut parts = version.split('.');
    let (Some(_), Some(_), Some(patch)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    patch.parse().ok()
}

/// MongoDB's releases in upgrade order: a binary runs data whose
/// featureCompatibilityVersion is its own release or the one before.
const RELEASES: [(u32, u32); 5] = [(4, 4), (5, 0), (6, 0), (7, 0), (8, 0)];

/// The tag of `image` and the `(major, minor)` release it names, when it names one.
pub fn image_release(image: &str) -> Option<(&str, (u32, u32))> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_segment = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (_, tag) = last_segment.split_once(':')?;
    let digits = tag.strip_prefix('v').unwrap_or(tag);
    let mut numbers = digits
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    let (Some(Some(major)), minor) = (numbers.next(), numbers.next()) else {
        return None;
    };
    Some((tag, (major, minor.flatten().unwrap_or(0))))
}

/// `"MAJOR.MINOR"` as a release.
fn parse_release(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Refuses an image the set's featureCompatibilityVersion (as last observed,
/// `fcv`) cannot run on: a release below the FCV (a downgrade below it), or
/// more than one release past it (a release skipped). Unknown releases or
/// FCV: accepted, mongod will say.
pub fn version_change_allowed(image: &str, fcv: Option<&str>) -> Result<(), InvalidInput> {
    let (Some((_, release)), Some(fcv_release)) =
        (image_release(image), fcv.and_then(parse_release))
    else {
        return Ok(());
    };
    let Some(position) = RELEASES.iter().position(|r| *r == fcv_release) else {
        return Ok(());
    };
    let next = RELEASES.get(position + 1).copied();
    if release == fcv_release || Some(release) == next {
        return Ok(());
    }
    let show = |(major, minor): (u32, u32)| format!("{major}.{minor}");
    let allowed = match next {
        Some(next) => format!("{} or {}", show(fcv_release), show(next)),
        None => show(fcv_release),
    };
    let why = if release < fcv_release {
        "a downgrade below the featureCompatibilityVersion"
    } else {
        "it skips a release"
    };
    Err(InvalidInput::VersionChangeRefused {
        image: image.to_string(),
        fcv: show(fcv_release),
        why: why.to_string(),
        allowed,
    })
}
