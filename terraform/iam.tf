# --- Identities ------------------------------------------------------------------------------
#
#   worker      the Job pods (through Workload Identity): Bigtable, and data buckets if granted
#   controller  the three functions: GKE Jobs/pods/logs/events, Firestore, publish alerts;
#               also the identity Eventarc uses to invoke them
#   fn-build    builds the functions' containers (Cloud Build inside Cloud Functions)
#   deployer    runs cloudbuild.yaml: tests, pushes the worker image, redeploys the functions

locals {
  bigtable_project = coalesce(var.bigtable_project, var.project_id)
}

# --- Worker ----------------------------------------------------------------------------------

resource "google_service_account" "worker" {
  account_id   = "${var.common_name}-worker"
  display_name = "cave-pipeline workers (Job pods, via Workload Identity)"

  depends_on = [google_project_service.apis]
}

# The Kubernetes service account <namespace>/<worker_ksa> may act as the worker GSA. The
# KSA itself is created by the operator (output `worker_ksa_setup`), annotated with
# iam.gke.io/gcp-service-account=<worker email>. The identity pool <project>.svc.id.goog only
# exists once the cluster does, hence the depends_on.
resource "google_service_account_iam_member" "worker_workload_identity" {
  service_account_id = google_service_account.worker.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[${var.namespace}/${local.worker_ksa}]"

  depends_on = [google_container_cluster.pipeline]
}

# Chunk locks, done markers and the graph itself (kvdbclient).
resource "google_project_iam_member" "worker_bigtable" {
  project = local.bigtable_project
  role    = "roles/bigtable.user"
  member  = google_service_account.worker.member
}

# Workloads that read segmentation or write meshes need a bucket grant. Nothing by default;
# for example:
#
# resource "google_storage_bucket_iam_member" "worker_data" {
#   bucket = "my-segmentation-bucket"
#   role   = "roles/storage.objectAdmin"   # objectViewer if the workload only reads
#   member = google_service_account.worker.member
# }

# --- Controller (the functions) --------------------------------------------------------------

resource "google_service_account" "controller" {
  account_id   = "${var.common_name}-controller"
  display_name = "cave-pipeline controller (Cloud Functions)"

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "controller" {
  for_each = toset([
    "roles/container.developer",    # create/patch/suspend/delete Jobs; read pods, logs, events
    "roles/datastore.user",         # Firestore: runs, layers, pods, dedupe
    "roles/logging.logWriter",      # the functions' structured logs
    "roles/eventarc.eventReceiver", # receive events from the Pub/Sub triggers
  ])

  project = var.project_id
  role    = each.value
  member  = google_service_account.controller.member
}

# The controller publishes only alerts. It needs no subscriber role: Eventarc owns the push
# subscriptions of the triggers and delivers to the functions.
resource "google_pubsub_topic_iam_member" "controller_publishes_alerts" {
  topic  = google_pubsub_topic.topics["alerts"].name
  role   = "roles/pubsub.publisher"
  member = google_service_account.controller.member
}

# Eventarc's push subscriptions authenticate as the controller (event_trigger's
# service_account_email) with an OIDC token minted by the Pub/Sub service agent. Granted by
# default to agents created after April 2021; harmless where it already holds.
resource "google_service_account_iam_member" "pubsub_agent_mints_controller_tokens" {
  service_account_id = google_service_account.controller.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent

  depends_on = [google_project_service.apis]
}

# (run.invoker on each function's Cloud Run service is in functions.tf, next to them.)

# --- Function builds -------------------------------------------------------------------------
#
# Cloud Functions builds each function's container with Cloud Build. Without an explicit
# build service account new projects fall back to the Compute Engine default account, which
# org policies often leave without the needed roles; a dedicated one avoids that.

resource "google_service_account" "function_build" {
  account_id   = "${var.common_name}-fn-build"
  display_name = "cave-pipeline function builds"

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "function_build" {
  project = var.project_id
  role    = "roles/cloudbuild.builds.builder" # logs, Artifact Registry (gcf-artifacts), source read
  member  = google_service_account.function_build.member
}

# --- Deployer (cloudbuild.yaml) --------------------------------------------------------------
#
# Give this account to the Cloud Build trigger (trigger settings: service account). The
# person creating the trigger needs iam.serviceAccountUser on it.

resource "google_service_account" "deployer" {
  account_id   = "${var.common_name}-deployer"
  display_name = "cave-pipeline Cloud Build deployer"

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "deployer" {
  for_each = toset([
    "roles/cloudfunctions.developer", # gcloud functions deploy
    "roles/container.clusterViewer",  # read the cluster endpoint and CA for the functions' env
    "roles/logging.logWriter",        # build logs (cloudbuild.yaml: CLOUD_LOGGING_ONLY)
  ])

  project = var.project_id
  role    = each.value
  member  = google_service_account.deployer.member
}

resource "google_artifact_registry_repository_iam_member" "deployer_pushes_images" {
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.deployer.member
}

# `gcloud functions deploy --service-account/--trigger-service-account/--build-service-account`
# requires acting as those accounts.
resource "google_service_account_iam_member" "deployer_acts_as" {
  for_each = {
    controller     = google_service_account.controller.name
    function_build = google_service_account.function_build.name
  }

  service_account_id = each.value
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.deployer.member
}

# --- Operators (optional) --------------------------------------------------------------------
#
# People who run the `pipeline` CLI: it writes runs and approvals to Firestore, publishes a
# kick, reads Jobs/pods/logs, and may pull alerts. Owners/Editors need none of this.

resource "google_project_iam_member" "operators" {
  for_each = {
    for pair in setproduct(var.operator_members, ["roles/datastore.user", "roles/container.developer"]) :
    "${pair[0]} ${pair[1]}" => { member = pair[0], role = pair[1] }
  }

  project = var.project_id
  role    = each.value.role
  member  = each.value.member
}

resource "google_pubsub_topic_iam_member" "operators_kick" {
  for_each = toset(var.operator_members)

  topic  = google_pubsub_topic.topics["kick"].name
  role   = "roles/pubsub.publisher"
  member = each.value
}

resource "google_pubsub_subscription_iam_member" "operators_alerts" {
  for_each = toset(var.operator_members)

  subscription = google_pubsub_subscription.alerts_operator.name
  role         = "roles/pubsub.subscriber"
  member       = each.value
}
