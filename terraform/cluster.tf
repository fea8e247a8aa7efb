# --- GKE Autopilot cluster ------------------------------------------------------------------
#
# Google manages the nodes; the cluster scales to zero nodes between layers, so it costs the
# flat cluster fee only. Jobs run on Spot pods (the Job manifests ask for them; nothing to set
# here). Workload Identity is always on in Autopilot: the pool is <project>.svc.id.goog.
#
# The controller (Cloud Functions) reaches the public control-plane endpoint with the CA below
# and its service account's token; authorization is IAM (roles/container.developer). Do not
# restrict the endpoint with master_authorized_networks_config unless the functions get a
# fixed egress (Serverless VPC Access + Cloud NAT): they have no stable source address.

resource "google_container_cluster" "pipeline" {
  name     = local.cluster_name
  location = var.region # regional: Autopilot clusters always are

  enable_autopilot    = true
  deletion_protection = var.deletion_protection

  release_channel {
    channel = "REGULAR"
  }

  # Ship only system logs to Cloud Logging: pod stdout stays on the kubelet, so millions of
  # chunk pods do not bill log ingestion (`pipeline inspect` / `kubectl logs` still read it).
  # Kubernetes events are system logs: they still reach Cloud Logging, and so the log sink.
  logging_config {
    enable_components = ["SYSTEM_COMPONENTS"]
  }

  depends_on = [google_project_service.apis]
}

# --- Artifact Registry: the worker images ---------------------------------------------------
#
# cloudbuild.yaml pushes <region>-docker.pkg.dev/<project>/<common_name>/worker:<tag> (and
# worker-demo:<tag>); pipeline.yml's `images` point there.

resource "google_artifact_registry_repository" "images" {
  location      = var.region
  repository_id = var.common_name
  format        = "DOCKER"
  description   = "cave-pipeline worker images"

  depends_on = [google_project_service.apis]
}

# Autopilot nodes pull images as the Compute Engine default service account unless the
# cluster is given another. Projects whose org policy strips that account's default Editor
# role need this grant to pull from the repository.
resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.reader"
  member     = local.compute_default_member
}
