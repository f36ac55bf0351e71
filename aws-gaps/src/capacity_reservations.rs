//! EC2 DescribeCapacityReservations, which moto lacks: the account's On-Demand Capacity
//! Reservations as a test sets them, filtered as the EC2 API reference documents the filters the
//! project's callers send (`state`, `instance-match-criteria`, `availability-zone`,
//! `instance-type`; a filter by another name matches nothing, so a caller relying on one sees an
//! empty answer rather than a wrong one), in one page. No IO.

/// One reservation the bed's account holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityReservation {
    pub id: String,
    pub instance_type: String,
    pub availability_zone: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// `active`, `expired`, `cancelled`, `pending`, `failed`, ...
    pub state: String,
    pub total: u32,
    pub available: u32,
}

/// The `Filter.N.Name` / `Filter.N.Value.M` pairs of an awsQuery form body.
fn filters(body: &str) -> Vec<(String, Vec<String>)> {
    let pairs: Vec<(String, String)> = body
        .split('&')
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            Some((decode(k), decode(v)))
        })
        .collect();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (k, v) in &pairs {
        let Some(rest) = k.strip_prefix("Filter.") else {
            continue;
        };
        let Some((n, field)) = rest.split_once('.') else {
            continue;
        };
        if field == "Name" {
            let values = pairs
                .iter()
                .filter(|(k2, _)| k2.starts_with(&format!("Filter.{n}.Value.")))
                .map(|(_, v2)| v2.clone())
                .collect();
            out.push((v.clone(), values));
        }
    }
    out
}

fn matches(r: &CapacityReservation, name: &str, values: &[String]) -> bool {
    let field = match name {
        "state" => &r.state,
        "instance-match-criteria" => &r.instance_match_criteria,
        "availability-zone" => &r.availability_zone,
        "instance-type" => &r.instance_type,
        _ => return false,
    };
    values.iter().any(|v| v == field)
}

/// The `CapacityReservationId.N` values of an awsQuery form body: the reservations asked for by
/// id (Karpenter's `id` selector term), in order.
fn asked_ids(body: &str) -> Vec<String> {
    let form = super::aws_wire::form(body);
    (1..)
        .map_while(|n| form.get(&format!("CapacityReservationId.{n}")).cloned())
        .collect()
}

/// The answer (ec2Query XML) to a DescribeCapacityReservations request `body` for the
/// reservations `held` by `owner`: `Err` with EC2's error (code, message) when an id asked for
/// is not held, as EC2 refuses an unknown id rather than leaving it out (the EC2 API reference's
/// error codes, `InvalidCapacityReservationId.NotFound`).
pub(super) fn answer(
    body: &str,
    held: &[CapacityReservation],
    owner: &str,
) -> Result<String, (&'static str, String)> {
    let filters = filters(body);
    let ids = asked_ids(body);
    if let Some(unknown) = ids.iter().find(|id| !held.iter().any(|r| &r.id == *id)) {
        return Err((
            "InvalidCapacityReservationId.NotFound",
            format!("The capacity reservation ID '{unknown}' does not exist"),
        ));
    }
    let mut items = String::new();
    for r in held.iter().filter(|r| {
        (ids.is_empty() || ids.contains(&r.id))
            && filters
                .iter()
                .all(|(name, values)| matches(r, name, values))
    }) {
        items.push_str(&format!(
            "<item><capacityReservationId>{id}</capacityReservationId><ownerId>{owner}</ownerId>\
             <instanceType>{it}</instanceType><instancePlatform>Linux/UNIX</instancePlatform>\
             <availabilityZone>{az}</availabilityZone><tenancy>default</tenancy>\
             <totalInstanceCount>{total}</totalInstanceCount>\
             <availableInstanceCount>{available}</availableInstanceCount>\
             <instanceMatchCriteria>{imc}</instanceMatchCriteria><state>{state}</state>\
             <endDateType>unlimited</endDateType></item>",
            id = super::aws_wire::xml_escape(&r.id),
            it = super::aws_wire::xml_escape(&r.instance_type),
            az = super::aws_wire::xml_escape(&r.availability_zone),
            total = r.total,
            available = r.available,
            imc = super::aws_wire::xml_escape(&r.instance_match_criteria),
            state = super::aws_wire::xml_escape(&r.state),
        ));
    }
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeCapacityReservationsResponse \
         xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>gap-proxy</requestId>\
         <capacityReservationSet>{items}</capacityReservationSet>\
         </DescribeCapacityReservationsResponse>"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(id: &str, imc: &str, state: &str) -> CapacityReservation {
        CapacityReservation {
            id: id.into(),
            instance_type: "m5.large".into(),
            availability_zone: "us-west-2a".into(),
            instance_match_criteria: imc.into(),
            state: state.into(),
            total: 2,
            available: 2,
        }
    }

    #[test]
    fn filters_select_as_documented_and_unknown_filters_match_nothing() {
        let held = [
            reservation("cr-0open", "open", "active"),
            reservation("cr-0targeted", "targeted", "active"),
            reservation("cr-0expired", "open", "expired"),
        ];
        let body = "Action=DescribeCapacityReservations&Filter.1.Name=state&Filter.1.Value.1=active\
                    &Filter.2.Name=instance-match-criteria&Filter.2.Value.1=open&Version=2016-11-15";
        let xml = answer(body, &held, "123456789012").expect("answered");
        assert!(xml.contains("cr-0open"), "{xml}");
        assert!(
            !xml.contains("cr-0targeted") && !xml.contains("cr-0expired"),
            "{xml}"
        );
        let all =
            answer("Action=DescribeCapacityReservations", &held, "123456789012").expect("answered");
        assert_eq!(all.matches("<item>").count(), 3);
        let unknown = answer(
            "Action=DescribeCapacityReservations&Filter.1.Name=tag%3Ateam&Filter.1.Value.1=ml",
            &held,
            "123456789012",
        )
        .expect("answered");
        assert_eq!(unknown.matches("<item>").count(), 0);
    }

    #[test]
    fn reservations_asked_by_id_are_those_only_and_an_unknown_id_is_refused() {
        let held = [
            reservation("cr-0open", "open", "active"),
            reservation("cr-0targeted", "targeted", "active"),
        ];
        let body = "Action=DescribeCapacityReservations&CapacityReservationId.1=cr-0targeted\
                    &Filter.1.Name=state&Filter.1.Value.1=active";
        let xml = answer(body, &held, "123456789012").expect("answered");
        assert!(
            xml.contains("cr-0targeted") && !xml.contains("cr-0open"),
            "{xml}"
        );
        let body = "Action=DescribeCapacityReservations&CapacityReservationId.1=cr-0gone";
        let (code, message) = answer(body, &held, "123456789012").expect_err("refused");
        assert_eq!(code, "InvalidCapacityReservationId.NotFound");
        assert!(message.contains("cr-0gone"), "{message}");
    }
}
