//! What moto lacks of EC2 images. Deprecation: `EnableImageDeprecation` records when an image is
//! deprecated, and DescribeImages answers (moto's, forwarded) carry it as `deprecationTime` on
//! the image's item, as EC2 does (EC2 API reference, EnableImageDeprecation and Image); the bed
//! owns its images, and EC2 lists an owner's deprecated images whatever `IncludeDeprecated`
//! says, so none is hidden. Sharing: moto keeps images per account and shows none of another
//! account's, while EC2's DescribeImages lists the images another account shares with the caller
//! (explicit launch permission) beside its own; images recorded as shared are added to answers
//! that ask for their ids, and so are the public images AWS's `/aws/service/` parameters name.
//! No IO.

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

/// An image another account owns and shares with the bed's account, or makes public.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedImage {
    pub id: String,
    pub owner: String,
    pub name: String,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    pub public: bool,
}

/// The images AWS's public parameters under `/aws/service/` name (EKS-optimized and
/// Bottlerocket images), as the public images of the account that publishes them: moto has none
/// of them, so without these an AMI alias would resolve to an image nothing describes.
pub(super) fn published(parameters: &BTreeMap<String, String>) -> Vec<SharedImage> {
    parameters
        .iter()
        .filter(|(name, _)| name.starts_with("/aws/service/"))
        .map(|(name, id)| {
            let path = name.trim_start_matches("/aws/service/");
            let path = path.trim_end_matches("/image_id");
            SharedImage {
                id: id.clone(),
                // The account the EKS user guide names for EKS-optimized images in most regions.
                owner: "602401143452".into(),
                name: path.replace('/', "-"),
                architecture: if path.contains("arm64") {
                    "arm64"
                } else {
                    "x86_64"
                }
                .into(),
                public: true,
            }
        })
        .collect()
}

/// The image ids a DescribeImages form `body` asks for: the values of its `image-id` filter
/// and its `ImageId.N` parameters.
pub(super) fn asked_ids(body: &str) -> Vec<String> {
    let pairs: Vec<(String, String)> = body
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| {
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
        .collect();
    let filters: Vec<String> = pairs
        .iter()
        .filter(|(k, v)| k.starts_with("Filter.") && k.ends_with(".Name") && v == "image-id")
        .map(|(k, _)| format!("{}.Value.", k.trim_end_matches(".Name")))
        .collect();
    pairs
        .into_iter()
        .filter(|(k, _)| k.starts_with("ImageId.") || filters.iter().any(|f| k.starts_with(f)))
        .map(|(_, v)| v)
        .collect()
}

/// `answer` (DescribeImages XML) with an item for each of `shared` whose id `asked` names and
/// `answer` does not already list (a test may register an image under a published name),
/// available, owned by its account (the fields EC2's Image carries that readers use).
pub(super) fn with_shared(answer: &str, shared: &[SharedImage], asked: &[String]) -> String {
    let items: String = shared
        .iter()
        .filter(|image| asked.contains(&image.id))
        .filter(|image| !answer.contains(&format!("<imageId>{}</imageId>", image.id)))
        .map(|image| {
            let (id, owner, name, architecture) = (
                super::aws_wire::xml_escape(&image.id),
                super::aws_wire::xml_escape(&image.owner),
                super::aws_wire::xml_escape(&image.name),
                super::aws_wire::xml_escape(&image.architecture),
            );
            let public = image.public;
            format!(
                "<item><imageId>{id}</imageId><imageLocation>{owner}/{name}</imageLocation>\
                 <imageState>available</imageState><imageOwnerId>{owner}</imageOwnerId>\
                 <isPublic>{public}</isPublic><architecture>{architecture}</architecture>\
                 <imageType>machine</imageType><name>{name}</name>\
                 <rootDeviceType>ebs</rootDeviceType><virtualizationType>hvm</virtualizationType>\
                 </item>"
            )
        })
        .collect();
    if items.is_empty() {
        return answer.to_owned();
    }
    if let Some(end) = answer.find("</imagesSet>") {
        return format!("{}{items}{}", &answer[..end], &answer[end..]);
    }
    answer.replacen(
        "<imagesSet/>",
        &format!("<imagesSet>{items}</imagesSet>"),
        1,
    )
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
    fn a_shared_image_is_listed_when_its_id_is_asked_for() {
        let body = "Action=DescribeImages&Filter.1.Name=image-id&Filter.1.Value.1=ami-0mine\
                    &Filter.1.Value.2=ami-0shared&Filter.2.Name=state&Filter.2.Value.1=x\
                    &IncludeDeprecated=true";
        let asked = asked_ids(body);
        assert_eq!(asked, ["ami-0mine", "ami-0shared"]);
        let shared = [SharedImage {
            id: "ami-0shared".into(),
            owner: "111122223333".into(),
            name: "acme & co".into(),
            architecture: "x86_64".into(),
            public: false,
        }];
        let answer = "<DescribeImagesResponse><imagesSet><item><imageId>ami-0mine</imageId></item></imagesSet></DescribeImagesResponse>";
        let got = with_shared(answer, &shared, &asked);
        assert!(
            got.contains(
                "<item><imageId>ami-0mine</imageId></item><item><imageId>ami-0shared</imageId>"
            ),
            "{got}"
        );
        assert!(
            got.contains("<imageOwnerId>111122223333</imageOwnerId>")
                && got.contains("acme &amp; co")
        );
        // An empty answer gets it too; an answer that did not ask for it does not.
        let empty = with_shared("<r><imagesSet/></r>", &shared, &asked);
        assert!(
            empty.contains("<imagesSet><item><imageId>ami-0shared"),
            "{empty}"
        );
        assert_eq!(
            with_shared(answer, &shared, &["ami-0mine".to_owned()]),
            answer
        );
    }

    #[test]
    fn published_parameters_name_public_images_of_their_architecture_once() {
        let parameters = BTreeMap::from([
            (
                "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/image_id".to_owned(),
                "ami-0arm".to_owned(),
            ),
            (
                "/aws/service/bottlerocket/aws-k8s-1.34/x86_64/latest/image_id".to_owned(),
                "ami-0br".to_owned(),
            ),
            ("/mine/image".to_owned(), "ami-0own".to_owned()),
        ]);
        let images = published(&parameters);
        assert_eq!(images.len(), 2, "only AWS's own parameters: {images:?}");
        let arm = images.iter().find(|i| i.id == "ami-0arm").expect("listed");
        assert_eq!(arm.architecture, "arm64");
        assert!(arm.public);
        let asked = ["ami-0arm".to_owned(), "ami-0br".to_owned()];
        let got = with_shared("<r><imagesSet/></r>", &images, &asked);
        assert!(got.contains("<isPublic>true</isPublic><architecture>arm64</architecture>"));
        assert!(got.contains("<architecture>x86_64</architecture>"));
        // An image moto already lists (registered by a test under that id) is not listed twice.
        let listed = "<r><imagesSet><item><imageId>ami-0br</imageId></item></imagesSet></r>";
        let got = with_shared(listed, &images, &asked);
        assert_eq!(got.matches("ami-0br").count(), 1, "{got}");
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
