//! How the proxy answers one request: an injected fault, an answer of its own for what moto
//! lacks or answers unlike AWS, or moto's answer forwarded (amended where AWS adds to it). Does IO
//! (moto, through `upstream.rs`).

use super::*;

pub(super) async fn handle(
    state: Arc<Mutex<State>>,
    client: Upstream,
    upstream: String,
    reset: ResetHandle,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let started = std::time::Instant::now();
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(std::io::Error::other)?;
    let probe = Request::from_parts(parts, ());
    let call = identify(&probe, &body);
    let key = (call.service.clone(), call.operation.clone());
    *lock(&state).counts.entry(key.clone()).or_default() += 1;
    let answer = answer(&state, client, upstream, reset, probe, body, call).await;
    let took = started.elapsed();
    let mut state = lock(&state);
    let slowest = state.slowest.entry(key).or_default();
    *slowest = (*slowest).max(took);
    answer
}

async fn answer(
    state: &Arc<Mutex<State>>,
    client: Upstream,
    upstream: String,
    reset: ResetHandle,
    probe: Request<()>,
    body: Bytes,
    call: Call,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let state = state.clone();

    match take_fault(&state, &call) {
        Some(Fault::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Err(std::io::Error::other("hung"));
        }
        Some(Fault::Reset) => {
            let socket = reset.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(socket) = socket {
                // SO_LINGER 0 is a property of the socket, shared by both descriptors: the last
                // close (hyper's, after this error) sends RST.
                let socket = TcpStream::from_std(socket)?;
                socket.set_zero_linger()?;
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "fault: reset",
            ));
        }
        Some(fault) => return Ok(aws_error(&call.service, fault)),
        None => {}
    }

    let refused = {
        let mut state = lock(&state);
        let refused = state
            .enforced
            .as_ref()
            .filter(|e| call.access_key.as_deref() == Some(e.access_key.as_str()))
            .and_then(|e| e.refuses(&call, &body));
        if let Some(refused) = &refused {
            state.refused.push(refused.clone());
        }
        refused.is_some()
    };
    if refused {
        return Ok(aws_error(&call.service, Fault::AccessDenied));
    }

    if call.service == "eks"
        && matches!(
            call.operation.as_str(),
            "ListAccessEntries" | "DescribeAccessEntry"
        )
    {
        let served = call
            .cluster
            .as_ref()
            .and_then(|c| lock(&state).access_entries.get(c).cloned());
        if let Some(entries) = served {
            return Ok(access_entries(&call, &entries));
        }
    }

    if call.service == "eks"
        && matches!(
            call.operation.as_str(),
            "ListPodIdentityAssociations" | "DescribePodIdentityAssociation"
        )
    {
        let served = call
            .cluster
            .as_ref()
            .and_then(|c| lock(&state).pod_identity.get(c).cloned());
        if let Some(associations) = served {
            return Ok(pod_identity_associations(&call, &associations));
        }
    }

    // Always served: moto lacks it, and every EC2NodeClass without its own key reads it.
    if call.service == "ec2" && call.operation == "GetEbsDefaultKmsKeyId" {
        let key = lock(&state)
            .ebs_default_kms_key
            .clone()
            .unwrap_or_else(|| aws_wire::aws_ebs_alias_arn(&call.region));
        return Ok(aws_wire::ebs_default_kms_key_id(&key));
    }

    if call.service == "servicequotas" && call.operation == "GetServiceQuota" {
        let asked: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let (service, code) = (
            asked["ServiceCode"].as_str().unwrap_or_default(),
            asked["QuotaCode"].as_str().unwrap_or_default(),
        );
        let value = (service == "ec2")
            .then(|| lock(&state).ec2_quotas.get(code).copied())
            .flatten();
        if let Some(value) = value {
            return Ok(aws_wire::service_quota(service, code, value));
        }
    }

    if call.service == "ec2" && call.operation == "DescribeCapacityReservations" {
        let held = lock(&state).capacity_reservations.clone();
        // moto's default account, which owns everything else the bed creates.
        return Ok(
            match capacity_reservations::answer(
                &String::from_utf8_lossy(&body),
                &held,
                "123456789012",
            ) {
                Ok(xml) => aws_wire::query_xml(200, xml),
                Err((code, message)) => aws_wire::ec2_error(400, code, &message),
            },
        );
    }

    if call.service == "ec2" && call.operation == "EnableImageDeprecation" {
        let asked = images::enable_deprecation(&String::from_utf8_lossy(&body));
        if let Some((id, at)) = asked {
            lock(&state).image_deprecations.insert(id, at);
            return Ok(aws_wire::query_xml(200, images::enabled()));
        }
    }

    if call.service == "ssm" && call.operation == "GetParameter" {
        let asked: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let name = asked["Name"].as_str().unwrap_or_default();
        let value = lock(&state).public_parameters.get(name).cloned();
        if let Some(value) = value {
            return Ok(aws_wire::ssm_parameter(name, &value, &call.region));
        }
    }

    let simulated = (call.service == "iam" && call.operation == "SimulatePrincipalPolicy")
        .then(|| lock(&state))
        .filter(|s| s.simulator)
        .map(|s| s.service_control_policies.clone());
    if let Some(scps) = simulated {
        let body = String::from_utf8_lossy(&body);
        let (status, xml) = simulator::simulate(&upstream, &body, &scps).await;
        return Ok(aws_wire::query_xml(status, xml));
    }

    // The EC2 quotas a test set, which launches are held to (vcpu_quotas.rs).
    let quotas = lock(&state).ec2_quotas.clone();
    if call.service == "ec2"
        && let Some((code, message)) =
            launch_parameters::refused(&upstream, &call, &String::from_utf8_lossy(&body), &quotas)
                .await
    {
        lock(&state).launch_refusals.push(LaunchRefusal {
            operation: call.operation.clone(),
            code: code.to_owned(),
            message: message.clone(),
            dry_run: aws_wire::dry_run(&body),
        });
        return Ok(aws_wire::ec2_error(400, code, &message));
    }
    if call.service == "ec2"
        && let Some(refused) = launch_parameters::fleet_refused(
            &upstream,
            &call,
            &String::from_utf8_lossy(&body),
            &quotas,
        )
        .await
    {
        lock(&state)
            .launch_refusals
            .extend(refused.iter().map(|(_, (code, message))| LaunchRefusal {
                operation: call.operation.clone(),
                code: (*code).to_owned(),
                message: message.clone(),
                dry_run: false,
            }));
        let form = aws_wire::form(&String::from_utf8_lossy(&body));
        return Ok(aws_wire::query_xml(
            200,
            fleet_errors::create_fleet_errors(&form, &refused),
        ));
    }

    // EC2 answers a permitted dry run with the error DryRunOperation (412) and does nothing
    // (the EC2 API reference, `DryRun` of every action); moto ignores the flag on its Describe
    // actions and lists everything. Karpenter's start checks its EC2 access with a dry
    // DescribeInstanceTypes (`CheckEC2Connectivity`, `pkg/operator/operator.go`).
    if call.service == "ec2" && call.operation.starts_with("Describe") && aws_wire::dry_run(&body) {
        return Ok(aws_wire::ec2_error(
            412,
            "DryRunOperation",
            "Request would have succeeded, but DryRun flag is set.",
        ));
    }

    if call.service == "ec2"
        && let Some(paged) = paging::paged(&call.operation)
    {
        let (parts, ()) = probe.into_parts();
        return Ok(catalogue::serve_page(
            &state,
            &client,
            &upstream,
            &parts,
            paged,
            &call.region,
            &body,
        )
        .await);
    }

    // What was asked, for answers the proxy adds to (DescribeImages' shared images).
    let asked_body = body.clone();
    let (parts, ()) = probe.into_parts();
    let (mut parts, mut body) = forward(&client, &upstream, &parts, body).await?;
    if aws_wire::unserved(parts.status.as_u16(), &body) {
        let mut state = lock(&state);
        let seen = state
            .unserved
            .entry((call.service.clone(), call.operation.clone()))
            .or_default();
        if seen.0 == 0 {
            // Logged the first time (the bed's aws-gap-proxy.log, a test's stderr); counted after.
            eprintln!(
                "aws-gap-proxy: moto could not serve {} {} ({})",
                call.service, call.operation, parts.status
            );
        }
        *seen = (seen.0 + 1, parts.status.as_u16());
    }

    if call.service == "ec2" && call.operation == "DescribeImages" && parts.status == StatusCode::OK
    {
        let (deprecations, shared) = {
            let state = lock(&state);
            let mut shared = state.shared_images.clone();
            shared.extend(images::published(&state.public_parameters));
            (state.image_deprecations.clone(), shared)
        };
        if !shared.is_empty() {
            body = Bytes::from(images::with_shared(
                &String::from_utf8_lossy(&body),
                &shared,
                &images::asked_ids(&String::from_utf8_lossy(&asked_body)),
            ));
        }
        if !deprecations.is_empty() {
            body = Bytes::from(images::with_deprecations(
                &String::from_utf8_lossy(&body),
                &deprecations,
            ));
        }
    }

    if call.operation == "DescribeCluster" && parts.status == StatusCode::OK {
        let (mode, vpc) = match call.cluster.as_ref() {
            Some(c) => {
                let state = lock(&state);
                (
                    state.authentication_modes.get(c).cloned(),
                    state.cluster_vpcs.get(c).cloned(),
                )
            }
            None => (None, None),
        };
        if let Some(with) = aws_wire::cluster_with(&body, mode.as_deref(), vpc.as_deref()) {
            body = Bytes::from(with);
        }
    }
    parts.headers.remove("transfer-encoding");
    parts.headers.remove("connection");
    parts
        .headers
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok(Response::from_parts(parts, Full::new(body)))
}
