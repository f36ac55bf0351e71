//! EC2 image deprecation, which moto lacks: `EnableImageDeprecation` records when an image is
//! deprecated, and DescribeImages answers (moto's, forwarded) carry it as `deprecationTime` on
//! the image's item, as EC2 does (EC2 API reference, EnableImageDeprecation and Image). The bed
//! owns its images, and EC2 lists an owner's deprecated images whatever `IncludeDeprecated`
//! says, so none is hidden. No IO.

use std::collections::BTreeMap;

/// The image id and deprecation time of an EnableImageDeprecation form `body`.
pub(super) fn enable_deprecation(body: &str) -> Option<(String, String)> {
    let mut id = None;
    let mut at = None;
    for pair in body.split('&') {
        let (k, v) = pair.split_once('=')?;
        let v = percent_encoding::percent_decode_str(v)
            .decode_utf8_lossy()
            .into_owned();
        match k {
            "ImageId" => id = Some(v),
            "DeprecateAt" => at = Some(v),
            _ => {}
        }
    }
    Some((id?, at?))
}

/// EnableImageDeprecation's answer.
pub(super) fn enabled() -> String {
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<EnableImageDeprecationResponse \
     xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>fault-proxy</requestId>\
     <return>true</return></EnableImageDeprecationResponse>"
        .to_owned()
}

/// `answer` (DescribeImages XML) with `deprecationTime` on the items of the images in
/// `deprecations`. Only the top-level items of `imagesSet` are images (their block device
/// mappings and tags are nested items).
pub(super) fn with_deprecations(answer: &str, deprecations: &BTreeMap<String, String>) -> String {
    let Some(start) = answer.find("<imagesSet>") else {
        return answer.to_owned();
    };
    let mut out = String::with_capacity(answer.len() + 64);
    let mut depth = 0usize;
    let mut item_start = None;
    let mut rest = start;
    out.push_str(&answer[..start]);
    let bytes = answer.as_bytes();
    let mut i = start;
    while i < bytes.len() {
        let tail = &answer[i..];
        if tail.starts_with("<item>") {
            if depth == 0 {
                item_start = Some(i);
            }
            depth += 1;
            i += "<item>".len();
        } else if tail.starts_with("</item>") {
            depth = depth.saturating_sub(1);
            if depth == 0
                && let Some(begin) = item_start.take()
            {
                out.push_str(&answer[rest..i]);
                let item = &answer[begin..i];
                if let Some(at) = image_id(item).and_then(|id| deprecations.get(id)) {
                    out.push_str(&format!(
                        "<deprecationTime>{}</deprecationTime>",
                        super::aws_wire::xml_escape(at)
                    ));
                }
                rest = i;
            }
            i += "</item>".len();
        } else if tail.starts_with("</imagesSet>") && depth == 0 {
            break;
        } else {
            i += tail.chars().next().map_or(1, char::len_utf8);
        }
    }
    out.push_str(&answer[rest..]);
    out
}

/// The first `imageId` of an item (its own: nested items hold no image id).
fn image_id(item: &str) -> Option<&str> {
    let from = item.find("<imageId>")? + "<imageId>".len();
    let to = item[from..].find("</imageId>")? + from;
    Some(&item[from..to])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deprecation_goes_on_the_images_own_item_only() {
        let answer = "<DescribeImagesResponse><imagesSet>\
            <item><imageId>ami-1</imageId><blockDeviceMapping><item><deviceName>/dev/xvda</deviceName></item></blockDeviceMapping><imageState>available</imageState></item>\
            <item><imageId>ami-2</imageId><tagSet><item><key>a</key></item></tagSet></item>\
            </imagesSet></DescribeImagesResponse>";
        let deprecations =
            BTreeMap::from([("ami-2".to_owned(), "2026-12-01T00:00:00Z".to_owned())]);
        let got = with_deprecations(answer, &deprecations);
        assert_eq!(got.matches("<deprecationTime>").count(), 1);
        assert!(
            got.contains("</tagSet><deprecationTime>2026-12-01T00:00:00Z</deprecationTime></item>"),
            "{got}"
        );
        assert!(got.contains("<imageState>available</imageState></item>"));
        // Nothing recorded: unchanged.
        assert_eq!(with_deprecations(answer, &BTreeMap::new()), answer);
    }

    #[test]
    fn enable_image_deprecation_names_the_image_and_the_time() {
        assert_eq!(
            enable_deprecation(
                "Action=EnableImageDeprecation&ImageId=ami-1&DeprecateAt=2026-12-01T00%3A00%3A00Z&Version=2016-11-15"
            ),
            Some(("ami-1".into(), "2026-12-01T00:00:00Z".into()))
        );
        assert_eq!(
            enable_deprecation("Action=EnableImageDeprecation&ImageId=ami-1"),
            None
        );
    }
}
