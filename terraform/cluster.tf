# --- GKE Autopilot cluster ------------------------------------------------------------------
#
# Google manages the nodes; the cluster scales to zero nodes between layers, so it costs the
# flat cluster fee only. Jobs run on Spot pods (the Job manifests ask for them; nothing to set
# here). Workload Identity is always on in Autopilot: the pool is <project>.svc.id.goog.
#
# Network: the nodes are private (no external addresses; Google APIs - Bigtable, Storage,
# Artifact Registry - through Private Google Access, which GKE turns on for the subnet). A
# workload that needs the internet needs Cloud NAT, or `private_nodes = false`.
#
# Control plane: the functions reach its public endpoint with the CA below and a token of
# their service account; authorization is IAM (container.clusterViewer) plus the Kubernetes
# Role of k8s/pipeline-rbac.yaml. The endpoint only accepts Google Cloud's public ranges
# (`control_plane_google_cidrs`: the functions have no fixed egress address; Cloud Shell is
# in them too) and the CIDRs in `authorized_networks` (operators running kubectl or the
# pipeline CLI from their own machines).
#
# Autopilot always runs GKE Dataplane V2 (network policy enforced), Workload Identity, the GKE
# metadata server and Shielded nodes.

resource "google_container_cluster" "pipeline" {
  # checkov:skip=CKV_GCP_12: Autopilot always runs Dataplane V2 (ADVANCED_DATAPATH below), which enforces NetworkPolicy; the Calico network_policy block the check reads does not apply
  # checkov:skip=CKV_GCP_61: intranode visibility and VPC flow logs would log every pod-to-pod flow of millions of short chunk pods; Autopilot manages the node network
  # checkov:skip=CKV_GCP_69: Autopilot always runs the GKE metadata server (Workload Identity); node_config cannot be set on Autopilot
  # checkov:skip=CKV_GCP_65: Google Groups for RBAC needs a Workspace domain with a gke-security-groups group; the RoleBinding names users and service accounts (k8s/pipeline-rbac.yaml)
  name     = local.cluster_name
  location = var.region # regional: Autopilot clusters always are

  enable_autopilot    = true
  deletion_protection = var.deletion_protection

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
    enable_private_endpoint = false # the functions reach the public endpoint (see above)
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

  # Pods are checked against the project's Binary Authorization policy (below: audit only).
  binary_authorization {
    evaluation_mode = "PROJECT_SINGLETON_POLICY_ENFORCE"
  }

  # Ship only system logs to Cloud Logging: pod stdout stays on the kubelet, so millions of
  # chunk pods do not bill log ingestion (`pipeline inspect` / `kubectl logs` still read it).
  # Kubernetes events are system logs: they still reach Cloud Logging, and so the log sink.
  logging_config {
    enable_components = ["SYSTEM_COMPONENTS"]
  }

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.nodes,
    google_binary_authorization_policy.audit,
  ]
}

# --- Binary Authorization: audit mode -------------------------------------------------------
#
# The project's policy (one per project: set manage_binary_authorization_policy = false if
# someone else owns it). Images from this deployment's repository and Google's system images
# are allowed silently; any other image is allowed too, but logged (DRYRUN_AUDIT_LOG_ONLY: the
# cluster's audit log, label imagepolicywebhook.image-policy.k8s.io/dry-run = "true"), so what
# enforcement would block shows up before anyone enforces it.
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
