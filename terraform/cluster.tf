# --- GKE Autopilot cluster ------------------------------------------------------------------
#
# Google manages the nodes; the cluster scales to zero nodes between layers, so it costs the
# flat cluster fee only. Jobs run on Spot pods (the Job manifests ask for them; nothing to set
# here). Workload Identity is always on in Autopilot: the pool is <project>.svc.id.goog.
#
# Network (network.tf): the network and subnetwork named by the variables, or created; the
# nodes are private (no external addresses; Google APIs through Private Google Access), and
# reach the internet (Docker Hub images, CAVE endpoints) through Cloud NAT.
#
# Control plane: the functions reach it through its DNS-based endpoint
# (gke-<id>.<region>.gke.goog), which Google's front end authorises by IAM
# (container.clusters.connect, in container.clusterViewer) before the Kubernetes Role of
# k8s/pipeline-kubernetes.yaml applies; it needs no IP allow-list and no VPC egress, and
# presents a publicly trusted certificate. Operators use it too:
# `gcloud container clusters get-credentials --dns-endpoint` (output kubernetes_cluster_context).
# The IP endpoint stays, limited to `authorized_networks` (empty by default: nobody).
#
# Autopilot always runs GKE Dataplane V2 (network policy enforced), Workload Identity, the GKE
# metadata server and Shielded nodes.

resource "google_container_cluster" "pipeline" {
  # checkov:skip=CKV_GCP_12: Autopilot always runs Dataplane V2 (ADVANCED_DATAPATH below), which enforces NetworkPolicy; the Calico network_policy block the check reads does not apply
  # checkov:skip=CKV_GCP_61: intranode visibility and VPC flow logs would log every pod-to-pod flow of millions of short chunk pods; Autopilot manages the node network
  # checkov:skip=CKV_GCP_69: Autopilot always runs the GKE metadata server (Workload Identity); node_config cannot be set on Autopilot
  # checkov:skip=CKV_GCP_65: Google Groups for RBAC needs a Workspace domain with a gke-security-groups group; the RoleBinding names users and service accounts (k8s/pipeline-kubernetes.yaml)
  name     = local.cluster_name
  location = var.region # regional: Autopilot clusters always are

  enable_autopilot    = true
  deletion_protection = var.deletion_protection

  network    = local.network
  subnetwork = local.subnetwork

  # Secure-by-default organisations no longer give the Compute Engine default account any
  # role, so the nodes could not write logs (the Job events!) or metrics with it. A dedicated
  # account with roles/container.defaultNodeServiceAccount (iam.tf) instead.
  cluster_autoscaling {
    auto_provisioning_defaults {
      service_account = google_service_account.nodes.email
      oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    }
  }

  release_channel {
    channel = "REGULAR"
  }

  resource_labels = var.labels

  datapath_provider = "ADVANCED_DATAPATH" # Dataplane V2: network policy (Autopilot's only choice)

  ip_allocation_policy {} # VPC-native (alias IPs); GKE picks the secondary ranges

  private_cluster_config {
    enable_private_nodes    = var.private_nodes
    enable_private_endpoint = false # the IP endpoint: only authorized_networks reach it
  }

  # The functions' and operators' way in (see above): IAM-gated, no allow-list.
  control_plane_endpoints_config {
    dns_endpoint_config {
      allow_external_traffic = true
    }
  }

  master_authorized_networks_config {
    gcp_public_cidrs_access_enabled = var.control_plane_google_cidrs

    dynamic "cidr_blocks" {
      for_each = var.authorized_networks
      content {
        cidr_block   = cidr_blocks.value.cidr_block
        display_name = cidr_blocks.value.display_name
      }
    }
  }

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  # Pods are checked against the project's Binary Authorization policy: the lab's own, or
  # (manage_binary_authorization_policy) the audit-only one below.
  binary_authorization {
    evaluation_mode = "PROJECT_SINGLETON_POLICY_ENFORCE"
  }

  # Ship only system logs to Cloud Logging: pod stdout stays on the kubelet, so millions of
  # chunk pods do not bill log ingestion (`pipeline inspect` / `kubectl logs` still read it).
  # Kubernetes events are system logs: they still reach Cloud Logging, and so the log sink.
  logging_config {
    enable_components = ["SYSTEM_COMPONENTS"]
  }

  lifecycle {
    precondition {
      condition     = (var.network == "") == (var.subnetwork == "")
      error_message = "network and subnetwork: set both (an existing network and its subnetwork in var.region), or neither (both are created)."
    }
  }

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.nodes,
    google_binary_authorization_policy.audit,
    google_compute_router_nat.nat, # pods pull from Docker Hub from their first minute
  ]
}

# --- Binary Authorization: audit mode, only when asked -----------------------------------------
#
# A project has one policy, and applying this one replaces whatever is there (possibly a
# lab's enforcing policy), so it is created only with manage_binary_authorization_policy =
# true. Then images from this deployment's repository and Google's system images are allowed
# silently; any other image is allowed too, but logged (DRYRUN_AUDIT_LOG_ONLY: the cluster's
# audit log, label imagepolicywebhook.image-policy.k8s.io/dry-run = "true"), so what
# enforcement would block shows up before anyone enforces it. Without it the cluster evaluates
# the project's existing policy (Google's default allows every image); an enforcing policy
# must admit the images pipeline.yml names (e.g. docker.io/caveconnectome/*).
resource "google_binary_authorization_policy" "audit" {
  count = var.manage_binary_authorization_policy ? 1 : 0

  description                   = "cave-pipeline: audit images from outside the pipeline's repository"
  global_policy_evaluation_mode = "ENABLE" # Google-maintained system images

  admission_whitelist_patterns {
    name_pattern = "${var.region}-docker.pkg.dev/${var.project_id}/${var.common_name}/*"
  }

  default_admission_rule {
    evaluation_mode  = "ALWAYS_DENY"
    enforcement_mode = "DRYRUN_AUDIT_LOG_ONLY"
  }

  depends_on = [google_project_service.apis]
}

# --- Artifact Registry: the worker images ---------------------------------------------------
#
# cloudbuild.yaml pushes <region>-docker.pkg.dev/<project>/<common_name>/worker:<tag> (and
# worker-demo:<tag>); pipeline.yml's `images` point there.

resource "google_artifact_registry_repository" "images" {
  # checkov:skip=CKV_GCP_84: CMEK needs a Cloud KMS key ring to own and rotate; Google-managed encryption at rest covers images rebuilt from the repository
  location      = var.region
  repository_id = var.common_name
  format        = "DOCKER"
  description   = "cave-pipeline worker images"

  depends_on = [google_project_service.apis]
}

# The nodes pull the worker images with their own service account (iam.tf).
resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.reader"
  member     = google_service_account.nodes.member
}
