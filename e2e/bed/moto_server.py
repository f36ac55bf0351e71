"""moto's server, with the few answers it gives unlike AWS corrected where they hold state.

Runs as `python moto_server.py -H HOST -p PORT` (moto.server's own arguments). What the gap proxy
cannot correct from outside (it sees requests and answers, not moto's state) is corrected here,
each from the AWS API reference of the action, never from what karpenter-health or Karpenter
expect:

- RegisterImage keeps `Architecture`, `RootDeviceName` and `VirtualizationType` (moto keeps only
  the name and description, so every registered image has no architecture and Karpenter, which
  resolves only x86_64 and arm64 images, resolves none).
- An instant EC2 Fleet's instances, on-demand and spot, carry the security groups of their launch
  template, its own or its primary network interface's (moto launches them with none, so every
  NodeClaim Karpenter launches would look drifted: SecurityGroupDrift), its metadata options (moto
  gives every instance its defaults), and its instance profile (moto associates none, so
  DescribeInstances shows no IamInstanceProfile and nothing can tell whose role an instance runs
  as: the node stand-in authenticates a kubelet as that role).

One change is for cost, not fidelity: the answers drawn from moto's fixed catalogues
(DescribeInstanceTypes, DescribeInstanceTypeOfferings, DescribeSpotPriceHistory) are rendered
once per request (and region, where they differ by region) and then repeated. moto renders its
catalogue of some 900 instance types anew for every call, about 3 s of CPU each on 2 cores, and
every lab test's Karpenter and operator ask for it: two thirds of moto's CPU in a lab test,
measured.
"""

import sys

from moto.ec2.models import amis as ami_models
from moto.ec2.models import fleets as fleet_models
from moto.core.responses import BaseResponse
from moto.ec2.responses import amis as ami_responses


def register_image(self):
    """AWS: RegisterImage's Architecture, RootDeviceName and VirtualizationType describe the
    image registered (the EC2 API reference, RegisterImage)."""
    result = original_register_image(self)
    image_id = result.result["ImageId"] if hasattr(result, "result") else None
    image = self.ec2_backend.amis.get(image_id) if image_id else None
    if image is not None:
        image.architecture = self._get_param("Architecture") or image.architecture
        image.root_device_name = self._get_param("RootDeviceName") or image.root_device_name
        image.virtualization_type = (
            self._get_param("VirtualizationType") or image.virtualization_type
        )
    return result


original_register_image = ami_responses.AmisResponse.register_image
ami_responses.AmisResponse.register_image = register_image


def launch_template_data(launch_spec):
    """The launch template data a fleet's launch specification names (its id and version), or
    None when moto cannot resolve it."""
    spec = launch_spec.launch_template_spec or {}
    backend = current_backend[0]
    template = None
    if backend is not None and spec.get("LaunchTemplateId"):
        template = backend.launch_templates.get(spec["LaunchTemplateId"])
    if template is None:
        return None
    version = spec.get("Version") or template.default_version_number
    try:
        return template.get_version(version).data
    except Exception:  # noqa: BLE001 - a template moto cannot resolve keeps moto's behaviour
        return None


def launch_template_security_groups(data):
    """The security group ids a launch template names (AWS: RequestLaunchTemplateData): its own
    SecurityGroupIds, else those of its primary network interface (device index 0), which become
    the instance's (AWS: LaunchTemplateInstanceNetworkInterfaceSpecification)."""
    groups = data.get("SecurityGroupIds") or []
    if not groups:
        primary = [
            n for n in data.get("NetworkInterfaces") or []
            if str(n.get("DeviceIndex", "0")) == "0"
        ]
        groups = primary[0].get("Groups") or [] if primary else []
    return list(groups) if isinstance(groups, (list, tuple)) else [groups]


current_backend = [None]


def launching_as_the_template(fleet, launch):
    """Runs `launch` (moto's creation of a fleet's on-demand or spot instances) with moto's
    run_instances corrected as AWS launches from a launch template: the instances get the
    template's security groups (moto gives on-demand ones the specification's GroupSet names and
    spot ones the default group), its metadata options (moto gives every instance its defaults:
    IMDSv1 allowed, hop limit 1) and its instance profile (moto associates none)."""
    backend = fleet.ec2_backend
    original = backend.run_instances
    current_backend[0] = backend

    def run_instances(*args, **kwargs):
        spec = next(
            (s for s in fleet.launch_specs if s.image_id == kwargs.get("image_id")
             and s.instance_type == kwargs.get("instance_type")
             and s.subnet_id == kwargs.get("subnet_id")),
            None,
        )
        data = launch_template_data(spec) if spec is not None else None
        if data:
            groups = launch_template_security_groups(data)
            if groups:
                kwargs["security_group_ids"] = groups
                kwargs["security_group_names"] = []
            if data.get("MetadataOptions") and not kwargs.get("metadata_options"):
                kwargs["metadata_options"] = dict(data["MetadataOptions"])
        reservation = original(*args, **kwargs)
        # The fleet's launch specification keeps the template's IamInstanceProfile as given
        # ({"Name": ...} or {"Arn": ...}) in a private field of moto's SpotFleetLaunchSpec.
        profile = getattr(spec, "_iam_instance_profile_arn", None)
        if isinstance(profile, dict) and (profile.get("Arn") or profile.get("Name")):
            for instance in reservation.instances:
                try:
                    backend.associate_iam_instance_profile(
                        instance_id=instance.id,
                        iam_instance_profile_arn=profile.get("Arn"),
                        iam_instance_profile_name=None if profile.get("Arn") else profile.get("Name"),
                    )
                except Exception as e:  # a profile IAM lacks: the instance runs without one
                    print(f"moto_server: instance {instance.id} gets no profile: {e}", file=sys.stderr)
        return reservation

    backend.run_instances = run_instances
    try:
        return launch()
    finally:
        del backend.run_instances


def create_on_demand_requests(self, weight_to_add):
    return launching_as_the_template(
        self, lambda: original_create_on_demand_requests(self, weight_to_add))


def create_spot_requests(self, weight_to_add):
    return launching_as_the_template(
        self, lambda: original_create_spot_requests(self, weight_to_add))


original_create_on_demand_requests = fleet_models.Fleet.create_on_demand_requests
fleet_models.Fleet.create_on_demand_requests = create_on_demand_requests
original_create_spot_requests = fleet_models.Fleet.create_spot_requests
fleet_models.Fleet.create_spot_requests = create_spot_requests

# What a catalogue answer depends on besides the request's other parameters: moto's instance
# types are one list for every account and region (InstanceTypeBackend.instance_types), its
# offerings and spot prices one list per region; it ignores a spot price query's time window.
CATALOGUE_ACTIONS = {
    "DescribeInstanceTypes": {"by_region": False, "ignored": set()},
    "DescribeInstanceTypeOfferings": {"by_region": True, "ignored": set()},
    "DescribeSpotPriceHistory": {"by_region": True, "ignored": {"StartTime", "EndTime"}},
}
catalogue_answers = {}


def call_action(self):
    """A catalogue action's first successful answer to a request, repeated for every request
    with the same parameters it depends on; every other action as moto answers it."""
    try:
        action = self._get_action()
    except Exception:
        action = None
    catalogue = CATALOGUE_ACTIONS.get(action)
    if catalogue is None:
        return original_call_action(self)
    params = tuple(sorted(
        (k, tuple(v) if isinstance(v, list) else v)
        for k, v in self.querystring.items() if k not in catalogue["ignored"]
    ))
    key = (action, self.region if catalogue["by_region"] else None, params)
    answer = catalogue_answers.get(key)
    if answer is None:
        answer = original_call_action(self)
        if answer[0] == 200:
            catalogue_answers[key] = answer
    status, headers, body = answer
    return status, dict(headers), body


original_call_action = BaseResponse.call_action
BaseResponse.call_action = call_action

if __name__ == "__main__":
    from moto.server import main

    main(sys.argv[1:])
