# --- The cluster's network --------------------------------------------------------------------
#
# No `default` network is assumed: organisations that set
# compute.skipDefaultNetworkCreation have none. Either name an existing network and subnetwork
# (`network`, `subnetwork`), or leave both empty and a network <common_name> is created here
# with one subnetwork in var.region (Private Google Access on: Bigtable, Storage, Artifact
# Registry without leaving Google's network).
#
# Private nodes have no internet egress, and Private Google Access reaches Google APIs only:
# PyChunkedGraph images come from Docker Hub (caveconnectome/...) and the L2 cache calls CAVE
# endpoints. Without a NAT their pods sit in ImagePullBackOff. So whenever the nodes are
# private, a Cloud Router and Cloud NAT serve the cluster's subnetwork (all its ranges: the
# pods' secondary range included), unless `cloud_nat = false` says the subnetwork has one.

locals {
  create_network = var.network == ""

  network = local.create_network ? one(google_compute_network.pipeline[*].self_link) : var.network
  # A name becomes the subnetwork's path in var.region (the NAT wants a reference).
  subnetwork = (
    local.create_network ? one(google_compute_subnetwork.pipeline[*].self_link)
    : strcontains(var.subnetwork, "/") ? var.subnetwork
    : "projects/${var.project_id}/regions/${var.region}/subnetworks/${var.subnetwork}"
  )

  create_nat = var.private_nodes && var.cloud_nat
}

resource "google_compute_network" "pipeline" {
  count = local.create_network ? 1 : 0

  name                    = var.common_name
  description             = "cave-pipeline: the GKE Autopilot cluster's network"
  auto_create_subnetworks = false

  depends_on = [google_project_service.apis]
}

# What the implied rule does, written down: no ingress from anywhere. GKE adds its own rules
# (node, pod and control-plane traffic) at a higher priority; this only catches the rest.
resource "google_compute_firewall" "deny_ingress" {
  count = local.create_network ? 1 : 0

  name      = "${var.common_name}-deny-ingress"
  network   = google_compute_network.pipeline[0].id
  direction = "INGRESS"
  priority  = 65534

  source_ranges = ["0.0.0.0/0"]
  deny {
    protocol = "all"
  }
}

resource "google_compute_subnetwork" "pipeline" {
  # checkov:skip=CKV_GCP_26: VPC flow logs would record every flow of millions of short chunk pods (billed per GB); Cloud NAT logs its errors (below)
  count = local.create_network ? 1 : 0

  name                     = var.common_name
  region                   = var.region
  network                  = google_compute_network.pipeline[0].id
  ip_cidr_range            = var.subnetwork_cidr
  private_ip_google_access = true # Google APIs from private nodes
}

resource "google_compute_router" "nat" {
  count = local.create_nat ? 1 : 0

  name    = "${var.common_name}-nat"
  region  = var.region
  network = local.network

  depends_on = [google_project_service.apis]
}

resource "google_compute_router_nat" "nat" {
  count = local.create_nat ? 1 : 0

  name   = "${var.common_name}-nat"
  router = google_compute_router.nat[0].name
  region = var.region

  nat_ip_allocate_option = "AUTO_ONLY"

  # Only the cluster's subnetwork (a region's subnetwork can have one NAT: a lab's other
  # subnetworks keep theirs); every range of it, so pods (secondary range) egress too.
  source_subnetwork_ip_ranges_to_nat = "LIST_OF_SUBNETWORKS"
  subnetwork {
    name                    = local.subnetwork
    source_ip_ranges_to_nat = ["ALL_IP_RANGES"]
  }

  log_config {
    enable = true
    filter = "ERRORS_ONLY" # port exhaustion and dropped connections, not every flow
  }
}
