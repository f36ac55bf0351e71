"""moto's server, with the few answers it gives unlike AWS corrected where they hold state.

Runs as `python moto_server.py -H HOST -p PORT` (moto.server's own arguments). What the gap proxy
cannot correct from outside (it sees requests and answers, not moto's state) is corrected here,
each from the AWS API reference of the action, never from what karpenter-health or Karpenter
expect:

- RegisterImage keeps `Architecture`, `RootDeviceName` and `VirtualizationType` (moto keeps only
  the name and description, so every registered image has no architecture and Karpenter, which
  resolves only x86_64 and arm64 images, resolves none).
- An instant EC2 Fleet's instances carry the security groups of their launch template, its own
  or its primary network interface's (moto launches them with none, so every NodeClaim Karpenter
  launches would look drifted: SecurityGroupDrift).
"""

import sys

from moto.ec2.models import amis as ami_models
from moto.ec2.models import fleets as fleet_models
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


def launch_template_security_groups(launch_spec):
    """The security group ids a fleet's launch specification names: its override's, else its
    launch template's (`SecurityGroupIds`, AWS: RequestLaunchTemplateData)."""
    spec = launch_spec.launch_template_spec or {}
    template = None
    backend = current_backend[0]
    if backend is not None and spec.get("LaunchTemplateId"):
        template = backend.launch_templates.get(spec["LaunchTemplateId"])
    if template is None:
        return []
    version = spec.get("Version") or template.default_version_number
    try:
        data = template.get_version(version).data
    except Exception:  # noqa: BLE001 - a template moto cannot resolve keeps moto's behaviour
        return []
    # The template's own SecurityGroupIds, else those of its primary network interface (device
    # index 0), which become the instance's (AWS: LaunchTemplateInstanceNetworkInterfaceSpecification).
    groups = data.get("SecurityGroupIds") or []
    if not groups:
        primary = [
            n for n in data.get("NetworkInterfaces") or []
            if str(n.get("DeviceIndex", "0")) == "0"
        ]
        groups = primary[0].get("Groups") or [] if primary else []
    return list(groups) if isinstance(groups, (list, tuple)) else [groups]


current_backend = [None]
original_run_instances = None


def create_on_demand_requests(self, weight_to_add):
    """moto launches a fleet's on-demand instances with the launch specification's GroupSet
    (names) only; AWS launches them with the launch template's security groups."""
    backend = self.ec2_backend
    original = backend.run_instances
    current_backend[0] = backend

    def run_instances(*args, **kwargs):
        spec = next(
            (s for s in self.launch_specs if s.image_id == kwargs.get("image_id")
             and s.instance_type == kwargs.get("instance_type")
             and s.subnet_id == kwargs.get("subnet_id")),
            None,
        )
        groups = launch_template_security_groups(spec) if spec is not None else []
        if groups and not kwargs.get("security_group_ids"):
            kwargs["security_group_ids"] = groups
        return original(*args, **kwargs)

    backend.run_instances = run_instances
    try:
        return original_create_on_demand_requests(self, weight_to_add)
    finally:
        del backend.run_instances


original_create_on_demand_requests = fleet_models.Fleet.create_on_demand_requests
fleet_models.Fleet.create_on_demand_requests = create_on_demand_requests

if __name__ == "__main__":
    from moto.server import main

    main(sys.argv[1:])
