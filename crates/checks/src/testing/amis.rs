//! Ways to change the healthy facts' images: the architectures Karpenter resolved, an alias and
//! SSM's answers, an amiFamily with images of given names, images selected by id and EC2's answer
//! about them. Pure data, no IO.

use super::*;
use crate::facts::ImageFacts;

impl Facts {
    /// Karpenter resolved one AMI per architecture in `archs` for the class.
    pub fn with_ami_architectures(self, archs: &[&str]) -> Self {
        self.with(|f| {
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.amis = archs
                    .iter()
                    .map(|arch| karpenter_health_api::karpenter::ResolvedAmi {
                        id: format!("ami-0{arch}"),
                        name: None,
                        deprecated: None,
                        requirements: vec![requirement("kubernetes.io/arch", "In", &[arch])],
                    })
                    .collect();
            }
            reask_images(f);
        })
    }

    /// Karpenter holds no image for the class: it never resolved one (a new class, or a class
    /// edited since), so `status.amis` is empty and its AMIsReady Unknown.
    pub fn with_no_images_resolved(self) -> Self {
        self.with(|f| {
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.amis.clear();
            }
            reask_images(f);
        })
        .with_karpenter_condition(karpenter_condition("AMIsReady", "Unknown", now()))
    }

    /// The class selects its images with `alias`; SSM answers each parameter it needs at
    /// Kubernetes `minor` with `answer`.
    pub fn with_ami_alias(
        self,
        alias: &str,
        minor: &str,
        answer: impl Fn(&str) -> Observed<String>,
    ) -> Self {
        self.with(|f| {
            f.cluster.node_class.spec.ami_selector_terms =
                vec![karpenter_health_api::karpenter::AmiSelectorTerm {
                    alias: Some(alias.into()),
                    ..Default::default()
                }];
            f.aws.ami_parameters = Some(Observed::Found(ami_parameters(alias, minor, answer)));
            reask_simulator(f);
        })
    }

    /// The class selects its images by tags with `amiFamily`, and Karpenter resolved images of
    /// these names (none deprecated).
    pub fn with_ami_family(self, ami_family: &str, names: &[&str]) -> Self {
        self.with(|f| {
            let spec = &mut f.cluster.node_class.spec;
            spec.ami_family = Some(ami_family.into());
            spec.ami_selector_terms = vec![karpenter_health_api::karpenter::AmiSelectorTerm {
                tags: BTreeMap::from([("team".into(), "platform".into())]),
                ..Default::default()
            }];
            f.aws.ami_parameters = None;
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.amis = names
                    .iter()
                    .enumerate()
                    .map(|(i, name)| karpenter_health_api::karpenter::ResolvedAmi {
                        id: format!("ami-0{i}"),
                        name: Some((*name).into()),
                        deprecated: Some(false),
                        requirements: Vec::new(),
                    })
                    .collect();
            }
            reask_images(f);
        })
    }

    /// The class names its images by id (`ids`), and EC2 answers DescribeImages with `answered`
    /// (an id left out is gone); Karpenter resolved the ids EC2 has available.
    pub fn with_image_ids(self, ids: &[&str], answered: Vec<ImageFacts>) -> Self {
        self.with(|f| {
            let class = &mut f.cluster.node_class;
            class.spec.ami_selector_terms = ids
                .iter()
                .map(|id| karpenter_health_api::karpenter::AmiSelectorTerm {
                    id: Some((*id).into()),
                    ..Default::default()
                })
                .collect();
            if let Some(status) = class.status.as_mut() {
                status.amis = answered
                    .iter()
                    .filter(|i| i.state == "available")
                    .map(|i| karpenter_health_api::karpenter::ResolvedAmi {
                        id: i.id.clone(),
                        name: i.name.clone(),
                        deprecated: Some(false),
                        requirements: Vec::new(),
                    })
                    .collect();
            }
            f.aws.ami_parameters = None;
            f.aws.images = Some(Observed::Found(answered));
            reask_simulator(f);
        })
    }
}
