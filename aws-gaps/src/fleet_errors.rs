//! The answer EC2 gives an instant CreateFleet that launched nothing (the gap proxy's refusals of
//! `launch_parameters.rs`, as the fleet's `Errors[]`). Pure, no IO.

use std::collections::BTreeMap;

use crate::aws_wire::xml_escape;
use crate::launch_parameters::{FleetOverride, Refusal, TemplateRef};

/// An instant CreateFleet's answer when EC2 launched nothing: a fleet id, no instance, and one
/// `errorSet` item (the EC2 API reference's `CreateFleetError`) per override refused, each with
/// its own launch template, override fields, code and message, and the request's (`form`)
/// lifecycle.
pub(super) fn create_fleet_errors(
    form: &BTreeMap<String, String>,
    refused: &[(FleetOverride, Refusal)],
) -> String {
    let lifecycle = form
        .get("TargetCapacitySpecification.DefaultTargetCapacityType")
        .map_or("on-demand", String::as_str);
    let mut items = String::new();
    for (over, (code, message)) in refused {
        let (template, version) = &over.template;
        let template = match template {
            TemplateRef::Id(id) => {
                format!("<launchTemplateId>{}</launchTemplateId>", xml_escape(id))
            }
            TemplateRef::Name(name) => {
                format!(
                    "<launchTemplateName>{}</launchTemplateName>",
                    xml_escape(name)
                )
            }
        };
        let fields: String = over
            .fields
            .iter()
            .map(|(field, v)| {
                let tag = lower_first(field);
                format!("<{tag}>{}</{tag}>", xml_escape(v))
            })
            .collect();
        items.push_str(&format!(
            "<item><launchTemplateAndOverrides><launchTemplateSpecification>{template}\
             <version>{}</version></launchTemplateSpecification><overrides>{fields}</overrides>\
             </launchTemplateAndOverrides><lifecycle>{lifecycle}</lifecycle>\
             <errorCode>{}</errorCode><errorMessage>{}</errorMessage></item>",
            xml_escape(version),
            xml_escape(code),
            xml_escape(message)
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateFleetResponse \
         xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>fault-proxy</requestId>\
         <fleetId>fleet-{:016x}</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/>\
         </CreateFleetResponse>",
        fleet_serial()
    )
}

/// `InstanceType` → `instanceType`: EC2's query answers name fields in lower camel case.
fn lower_first(field: &str) -> String {
    let mut chars = field.chars();
    chars
        .next()
        .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// A fleet id's number, distinct within the process.
fn fleet_serial() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws_wire::form;
    use crate::launch_parameters::fleet_overrides;

    #[test]
    fn a_refused_fleet_answers_each_overrides_own_error_and_no_instance() {
        let asked = form(
            "Action=CreateFleet&Type=instant\
             &TargetCapacitySpecification.DefaultTargetCapacityType=spot\
             &LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=karpenter-a\
             &LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version=%24Latest\
             &LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large\
             &LaunchTemplateConfigs.1.Overrides.1.SubnetId=subnet-1\
             &LaunchTemplateConfigs.1.Overrides.2.InstanceType=m5.xlarge\
             &LaunchTemplateConfigs.1.Overrides.2.SubnetId=subnet-2",
        );
        let refused: Vec<_> = fleet_overrides(&asked)
            .into_iter()
            .map(|o| {
                let subnet = o.fields["SubnetId"].clone();
                (
                    o,
                    (
                        "InsufficientFreeAddressesInSubnet",
                        format!("no room in '{subnet}' <x>"),
                    ),
                )
            })
            .collect();
        let xml = create_fleet_errors(&asked, &refused);
        assert_eq!(xml.matches("<item>").count(), 2, "{xml}");
        assert!(
            xml.contains("<instanceType>m5.xlarge</instanceType>"),
            "{xml}"
        );
        assert!(xml.contains("<subnetId>subnet-2</subnetId>"), "{xml}");
        assert!(xml.contains("no room in 'subnet-1' &lt;x&gt;"), "{xml}");
        assert!(xml.contains("no room in 'subnet-2'"), "{xml}");
        assert!(xml.contains("<lifecycle>spot</lifecycle>"), "{xml}");
        assert!(
            xml.contains("<launchTemplateName>karpenter-a</launchTemplateName>"),
            "{xml}"
        );
        assert!(xml.contains("<fleetInstanceSet/>"), "{xml}");
    }
}
