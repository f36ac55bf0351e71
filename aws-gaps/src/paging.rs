//! EC2's paging of DescribeInstanceTypes and DescribeInstanceTypeOfferings, which moto ignores
//! (it answers all of its ~1,400 instance types in one response of several MB, about 3 s on two
//! cores). EC2 answers at most `MaxResults` items a call (5-100 for instance types, 5-1000 for
//! offerings; the EC2 API reference of each action) and a `nextToken` while more remain; the
//! proxy does the same from one full answer per listing, kept so the next pages and later
//! listings cost moto nothing. Pure, no IO: the proxy fetches, this module slices.

use std::collections::BTreeMap;
use std::sync::Arc;

/// The two actions paged here, with EC2's documented `MaxResults` bounds and the element that
/// holds their items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Paged {
    pub(super) action: &'static str,
    item_set: &'static str,
    min: usize,
    max: usize,
}

pub(super) const INSTANCE_TYPES: Paged = Paged {
    action: "DescribeInstanceTypes",
    item_set: "instanceTypeSet",
    min: 5,
    max: 100,
};

pub(super) const OFFERINGS: Paged = Paged {
    action: "DescribeInstanceTypeOfferings",
    item_set: "instanceTypeOfferingSet",
    min: 5,
    max: 1000,
};

/// The paged action `operation` is, if any.
pub(super) fn paged(operation: &str) -> Option<Paged> {
    [INSTANCE_TYPES, OFFERINGS]
        .into_iter()
        .find(|p| p.action == operation)
}

/// What a request asks of a paged listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PageRequest {
    /// The request's form body without its paging parameters: what the listing's items depend
    /// on (action, filters, location type, instance types), and the body sent to moto.
    pub(super) listing: String,
    /// Items of this page at most: `MaxResults`, else the action's maximum.
    pub(super) size: usize,
    /// Where this page starts: 0, or what the previous page's `nextToken` said.
    pub(super) offset: usize,
}

/// Why a page request is refused, as EC2 refuses it (HTTP 400).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) code: &'static str,
    pub(super) message: String,
}

/// Reads the paging parameters out of an awsQuery form body.
pub(super) fn page_request(paged: Paged, body: &str) -> Result<PageRequest, Refusal> {
    let mut listing = Vec::new();
    let (mut size, mut offset) = (paged.max, 0);
    for pair in body.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "MaxResults" => {
                size = value
                    .parse()
                    .ok()
                    .filter(|n| (paged.min..=paged.max).contains(n))
                    .ok_or_else(|| Refusal {
                        code: "InvalidParameterValue",
                        message: format!(
                            "Value ( {value} ) for parameter maxResults is invalid. Expecting a \
                             value between {} and {}.",
                            paged.min, paged.max
                        ),
                    })?;
            }
            "NextToken" => {
                offset = token_offset(value).ok_or_else(|| Refusal {
                    code: "InvalidNextToken",
                    message: format!("The token '{value}' is invalid."),
                })?;
            }
            _ => listing.push(pair),
        }
    }
    Ok(PageRequest {
        listing: listing.join("&"),
        size,
        offset,
    })
}

const TOKEN_PREFIX: &str = "kh-page-";

fn token_offset(token: &str) -> Option<usize> {
    token
        .strip_prefix(TOKEN_PREFIX)
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
}

/// A full answer of a paged action, split into its items.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Listing {
    /// Everything up to and including the item set's opening tag.
    head: String,
    items: Vec<String>,
    /// Everything from the item set's closing tag on.
    tail: String,
    /// Built from the region's subnets (emulated offerings), which tests change: a listing's
    /// first page rebuilds it.
    pub(super) follows_subnets: bool,
}

impl Listing {
    /// Splits moto's answer (ec2Query XML) into its top-level items; `None` when the answer has
    /// no item set (an error, or a shape this module does not know).
    pub(super) fn parse(paged: Paged, xml: &str) -> Option<Self> {
        let set = paged.item_set;
        let empty = format!("<{set}/>");
        if let Some(at) = xml.find(&empty) {
            return Some(Self {
                head: format!("{}<{set}>", &xml[..at]),
                items: Vec::new(),
                tail: format!("</{set}>{}", &xml[at + empty.len()..]),
                follows_subnets: false,
            });
        }
        let open = format!("<{set}>");
        let close = format!("</{set}>");
        let start = xml.find(&open)? + open.len();
        let end = start + xml[start..].rfind(&close)?;
        Some(Self {
            head: xml[..start].to_owned(),
            items: top_level_items(&xml[start..end])?,
            tail: xml[end..].to_owned(),
            follows_subnets: false,
        })
    }

    /// A listing of `items` (each one `<item>…</item>`) in an answer of `paged`'s shape.
    pub(super) fn of_items(paged: Paged, items: Vec<String>) -> Self {
        let response = format!("{}Response", paged.action);
        Self {
            head: format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><{response} \
                 xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
                 <requestId>aws-gap-proxy</requestId><{}>",
                paged.item_set
            ),
            items,
            tail: format!("</{}></{response}>", paged.item_set),
            follows_subnets: false,
        }
    }

    /// This listing, rebuilt at each first page.
    pub(super) fn following_subnets(self) -> Self {
        Self {
            follows_subnets: true,
            ..self
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// The page `request` asks for, with a `nextToken` while items remain.
    pub(super) fn page(&self, request: &PageRequest) -> String {
        let start = request.offset.min(self.items.len());
        let end = start.saturating_add(request.size).min(self.items.len());
        let mut xml = self.head.clone();
        for item in &self.items[start..end] {
            xml.push_str(item);
        }
        let root_close = self.tail.rfind("</").unwrap_or(self.tail.len());
        xml.push_str(&self.tail[..root_close]);
        if end < self.items.len() {
            xml.push_str(&format!("<nextToken>{TOKEN_PREFIX}{end}</nextToken>"));
        }
        xml.push_str(&self.tail[root_close..]);
        xml
    }
}

/// The top-level `<item>` elements of an item set's content, nested items kept inside theirs.
fn top_level_items(content: &str) -> Option<Vec<String>> {
    let mut items = Vec::new();
    let (mut depth, mut start, mut at) = (0usize, 0usize, 0usize);
    while let Some(found) = content[at..].find('<') {
        let tag_start = at + found;
        let tag_end = tag_start + content[tag_start..].find('>')? + 1;
        let tag = &content[tag_start..tag_end];
        if tag == "<item/>" {
            if depth == 0 {
                items.push(tag.to_owned());
            }
        } else if tag == "<item>" {
            if depth == 0 {
                start = tag_start;
            }
            depth += 1;
        } else if tag == "</item>" {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                items.push(content[start..tag_end].to_owned());
            }
        }
        at = tag_end;
    }
    (depth == 0).then_some(items)
}

/// Full listings by (region, listing), kept for the proxy's life: moto's instance types and
/// offerings are fixed data, so the first page's answer serves every later page and listing.
#[derive(Debug, Default)]
pub(super) struct Listings {
    by_request: BTreeMap<(String, String), Arc<Listing>>,
}

impl Listings {
    pub(super) fn get(&self, region: &str, listing: &str) -> Option<Arc<Listing>> {
        self.by_request
            .get(&(region.to_owned(), listing.to_owned()))
            .cloned()
    }

    pub(super) fn keep(&mut self, region: &str, listing: &str, full: Arc<Listing>) {
        self.by_request
            .insert((region.to_owned(), listing.to_owned()), full);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(items: &[&str]) -> String {
        format!(
            "<?xml version=\"1.0\"?><DescribeInstanceTypesResponse><requestId>r</requestId>\
             <instanceTypeSet>{}</instanceTypeSet></DescribeInstanceTypesResponse>",
            items.concat()
        )
    }

    fn item(name: &str) -> String {
        format!(
            "<item><instanceType>{name}</instanceType><supportedUsageClasses><item>on-demand\
             </item><item>spot</item></supportedUsageClasses></item>"
        )
    }

    #[test]
    fn items_are_split_at_the_top_level_only() {
        let names: Vec<String> = (0..7).map(|i| item(&format!("t{i}.large"))).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let listing = Listing::parse(INSTANCE_TYPES, &answer(&refs)).expect("parsed");
        assert_eq!(listing.len(), 7);
        assert_eq!(listing.items[3], names[3]);
    }

    #[test]
    fn pages_follow_max_results_and_end_without_a_token() {
        let names: Vec<String> = (0..7).map(|i| item(&format!("t{i}.large"))).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let listing = Listing::parse(INSTANCE_TYPES, &answer(&refs)).expect("parsed");
        let first = page_request(
            INSTANCE_TYPES,
            "Action=DescribeInstanceTypes&MaxResults=5&Version=2016-11-15",
        )
        .expect("valid");
        assert_eq!(
            first.listing,
            "Action=DescribeInstanceTypes&Version=2016-11-15"
        );
        let page = listing.page(&first);
        assert_eq!(page.matches("<instanceType>").count(), 5);
        assert!(page.contains("<nextToken>kh-page-5</nextToken></DescribeInstanceTypesResponse>"));
        let second = page_request(
            INSTANCE_TYPES,
            "Action=DescribeInstanceTypes&MaxResults=5&NextToken=kh-page-5&Version=2016-11-15",
        )
        .expect("valid");
        assert_eq!(second.listing, first.listing, "the same listing");
        let page = listing.page(&second);
        assert!(page.contains("t5.large") && page.contains("t6.large") && !page.contains("t4."));
        assert!(!page.contains("nextToken"));
    }

    #[test]
    fn without_max_results_a_page_holds_the_actions_maximum() {
        let request = page_request(OFFERINGS, "Action=DescribeInstanceTypeOfferings").unwrap();
        assert_eq!(request.size, 1000);
        let request = page_request(INSTANCE_TYPES, "Action=DescribeInstanceTypes").unwrap();
        assert_eq!(request.size, 100);
    }

    #[test]
    fn max_results_outside_ec2s_bounds_and_foreign_tokens_are_refused() {
        for bad in ["MaxResults=4", "MaxResults=101", "MaxResults=x"] {
            let refused = page_request(INSTANCE_TYPES, &format!("Action=A&{bad}")).unwrap_err();
            assert_eq!(refused.code, "InvalidParameterValue", "{bad}");
        }
        assert!(page_request(OFFERINGS, "MaxResults=1000").is_ok());
        let refused = page_request(OFFERINGS, "NextToken=abc").unwrap_err();
        assert_eq!(refused.code, "InvalidNextToken");
    }

    #[test]
    fn an_empty_item_set_is_a_listing_of_nothing() {
        let xml = "<R><requestId>r</requestId><instanceTypeOfferingSet/></R>";
        let listing = Listing::parse(OFFERINGS, xml).expect("parsed");
        assert_eq!(listing.len(), 0);
        let page = listing.page(&page_request(OFFERINGS, "").unwrap());
        assert_eq!(
            page,
            "<R><requestId>r</requestId><instanceTypeOfferingSet></instanceTypeOfferingSet></R>"
        );
    }

    #[test]
    fn an_answer_without_the_item_set_or_unbalanced_is_not_a_listing() {
        assert!(Listing::parse(INSTANCE_TYPES, "<Response><Errors/></Response>").is_none());
        let broken = "<X><instanceTypeSet><item><item></item></instanceTypeSet></X>";
        assert!(Listing::parse(INSTANCE_TYPES, broken).is_none());
    }

    #[test]
    fn built_listings_page_like_parsed_ones() {
        let listing = Listing::of_items(OFFERINGS, vec!["<item>a</item>".into(); 6]);
        let page = listing.page(&page_request(OFFERINGS, "MaxResults=5").unwrap());
        assert!(page.starts_with("<?xml"));
        assert_eq!(page.matches("<item>").count(), 5);
        assert!(page.ends_with(
            "</instanceTypeOfferingSet><nextToken>kh-page-5</nextToken>\
             </DescribeInstanceTypeOfferingsResponse>"
        ));
    }
}
