# --- Identities ------------------------------------------------------------------------------
#
#   worker      the layer Jobs' pods (through Workload Identity): data on the Bigtable
#               instance (bigtable.user), the data buckets
#   setup       the setup Jobs' pods (through Workload Identity): they create the graph's
#               table, so bigtable.admin on the instance; the data buckets
#   controller  the functions: Firestore, publish alerts; GKE through the controller's
#               Kubernetes Role of k8s/pipeline-kubernetes.yaml (one namespace)
#   invoker     the identity the push subscriptions present to the functions (run.invoker
#               on them, nothing else)
#   fn-build    builds the functions' containers (Cloud Build inside Cloud Functions)
#   nodes       the Autopilot nodes: write logs/metrics (the Job events!), pull the images
#   deployer    runs cloudbuild.yaml: tests, pushes the worker image, redeploys the functions
#
# Every grant is on the narrowest resource that carries it (an instance, a topic, a
# repository, a service); project-level roles are the ones that exist only there. docs/deploying.md
# ("Identities at a glance", docs/deploying.md#identities-at-a-glance) tabulates them.

locals {
  bigtable_project = coalesce(var.bigtable_project, var.project_id)
}

# --- Pod identities: worker and setup ----------------------------------------------------------
#
# Under Workload Identity (the only way a pod gets a Google identity where the organisation
# blocks service-account keys) each Kubernetes service account acts as its own Google one:
#   <namespace>/<worker_ksa> -> worker   layer Jobs: read and write the graph's rows
#   <namespace>/<setup_ksa>  -> setup    setup Jobs: create the graph's table and metadata
# roles/bigtable.user holds no bigtable.tables.create/update, so the setup pods (the images'
# ingest setup, worker.setup) need roles/bigtable.admin; the workers keep bigtable.user. The
# Kubernetes service accounts are created, annotated, by the pipeline_kubernetes_manifest
# output. The identity pool <project>.svc.id.goog only exists once the cluster does, hence
# the depends_on.

locals {
  pod_accounts = {
    worker = { gsa = google_service_account.worker, ksa = var.worker_ksa }
    setup  = { gsa = google_service_account.setup, ksa = var.setup_ksa }
  }

  # Each data bucket's object role: read-only -> objectViewer, read-write -> objectUser.
  data_bucket_grants = {
    for pair in setproduct(var.data_buckets, keys(local.pod_accounts)) :
    "${pair[0].name} ${pair[1]}" => {
      bucket  = pair[0].name
      account = pair[1]
      role    = pair[0].access == "read-write" ? "roles/storage.objectUser" : "roles/storage.objectViewer"
    }
  }
}

resource "google_service_account" "worker" {
  account_id   = "${var.common_name}-worker"
  display_name = "cave-pipeline workers (layer Job pods, via Workload Identity)"

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "setup" {
  account_id   = "${var.common_name}-setup"
  display_name = "cave-pipeline setup passes (setup Job pods, via Workload Identity)"

  depends_on = [google_project_service.apis]
}

resource "google_service_account_iam_member" "pod_workload_identity" {
  for_each = local.pod_accounts

  service_account_id = each.value.gsa.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[${var.namespace}/${each.value.ksa}]"

  depends_on = [google_container_cluster.pipeline]
}

# Chunk locks, done markers and the graph itself (kvdbclient): read and write on the
# pipeline's instance only, not on every instance of the project.
resource "google_bigtable_instance_iam_member" "worker_bigtable" {
  project  = local.bigtable_project
  instance = var.bigtable_instance
  role     = "roles/bigtable.user"
  member   = google_service_account.worker.member
}

# The setup pass creates the graph's table (and the l2cache's): bigtable.tables.create and
# update, which only the admin role holds among the predefined ones; on the instance only.
resource "google_bigtable_instance_iam_member" "setup_bigtable" {
  project  = local.bigtable_project
  instance = var.bigtable_instance
  role     = "roles/bigtable.admin"
  member   = google_service_account.setup.member
}

# PyChunkedGraph's gs:// reads (watershed, edges, components, agglomeration) and its mesh
# writes, for the workers and for the setups (which read the watershed's info and write mesh
# metadata), as var.data_buckets declares.
resource "google_storage_bucket_iam_member" "pods_data" {
  for_each = local.data_bucket_grants

  bucket = each.value.bucket
  role   = each.value.role
  member = local.pod_accounts[each.value.account].gsa.member
}

# --- Controller (the functions) --------------------------------------------------------------

resource "google_service_account" "controller" {
  account_id   = "${var.common_name}-controller"
  display_name = "cave-pipeline controller (Cloud Functions)"

  depends_on = [google_project_service.apis]
}

# Project level only what exists only there. The functions' logs need no role (Cloud Run
# writes stdout); Pub/Sub pushes to them as the invoker below, so no Eventarc role either.
resource "google_project_iam_member" "controller" {
  for_each = toset([
    "roles/datastore.user",          # Firestore: runs, layers, pods, dedupe
    "roles/container.clusterViewer", # the DNS endpoint (container.clusters.connect); Kubernetes RBAC does the rest
    "roles/monitoring.viewer",       # Bigtable's CPU load: the ramp's gate (docs/bigtable-ramp-and-bill.md)
  ])

  project = var.project_id
  role    = each.value
  member  = google_service_account.controller.member
}

# The controller reads the graph's table, read-only and on the pipeline's instance only: its
# metadata cell around a setup pass (docs/setup-passes.md), the done markers of a completed
# layer (docs/verify.md) and of a pod suspected hung (docs/hung-workers.md).
resource "google_bigtable_instance_iam_member" "controller_reads_graph_tables" {
  project  = local.bigtable_project
  instance = var.bigtable_instance
  role     = "roles/bigtable.reader"
  member   = google_service_account.controller.member
}

# The controller publishes alerts (its own and the dead-letter alerts) and kicks: the tick's
# tail watch hands a run whose layer finished in its last seconds to on_kick
# (shared/control/advance_watch.py).
resource "google_pubsub_topic_iam_member" "controller_publishes_alerts" {
  topic  = google_pubsub_topic.topics["alerts"].name
  role   = "roles/pubsub.publisher"
  member = google_service_account.controller.member
}

resource "google_pubsub_topic_iam_member" "controller_publishes_kicks" {
  topic  = google_pubsub_topic.topics["kick"].name
  role   = "roles/pubsub.publisher"
  member = google_service_account.controller.member
}

# --- Invoker (the push subscriptions' identity) ------------------------------------------------
#
# The trigger subscriptions (functions.tf) push with an OIDC token of this account, minted by
# the Pub/Sub service agent. It can invoke the four functions and do nothing else, so a token
# the agent mints for it is worth no more than a push.

resource "google_service_account" "invoker" {
  account_id   = "${var.common_name}-invoker"
  display_name = "cave-pipeline push subscriptions -> functions"

  depends_on = [google_project_service.apis]
}

# Granted by default to agents created after April 2021; harmless where it already holds.
resource "google_service_account_iam_member" "pubsub_agent_mints_invoker_tokens" {
  service_account_id = google_service_account.invoker.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

# (run.invoker on each function's Cloud Run service is in functions.tf, next to them; the
# Pub/Sub agent's grants on the topics and subscriptions are in pubsub.tf.)

# --- Function builds -------------------------------------------------------------------------
#
# Cloud Functions builds each function's container with Cloud Build as this account. A build
# reads the staged source, writes its log, and pushes the image (and its cache) to the
# functions' repository - that and no more; not roles/cloudbuild.builds.builder, which holds
# every bucket and repository of the project.

resource "google_service_account" "function_build" {
  account_id   = "${var.common_name}-fn-build"
  display_name = "cave-pipeline function builds"

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "function_build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter" # the build's log
  member  = google_service_account.function_build.member
}

resource "google_artifact_registry_repository_iam_member" "function_build_pushes" {
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.function_build.member
}

# The source: terraform's staged zip (our bucket) or, for `gcloud functions deploy
# --source=dir` (cloudbuild.yaml), the copy Cloud Functions keeps in its own
# gcf-v2-sources-<project number>-<region> bucket, which exists only after the first upload -
# hence a project grant with a condition on those two buckets rather than a bucket grant.
resource "google_project_iam_member" "function_build_reads_source" {
  project = var.project_id
  role    = "roles/storage.objectViewer"
  member  = google_service_account.function_build.member

  condition {
    title       = "function-sources-only"
    description = "The functions' source buckets: terraform's and Cloud Functions' own."
    expression = join(" || ", flatten([
      for bucket in [local.functions_bucket, "gcf-v2-sources-${data.google_project.this.number}-${var.region}"] : [
        "resource.name == \"projects/_/buckets/${bucket}\"",
        "resource.name.startsWith(\"projects/_/buckets/${bucket}/\")",
      ]
    ]))
  }
}

# --- Nodes -----------------------------------------------------------------------------------
#
# Autopilot nodes run as this account (cluster.tf, auto_provisioning_defaults). Without
# roles/container.defaultNodeServiceAccount - which secure-by-default organisations no longer
# give the Compute Engine default account - the nodes write no logs, so no Kubernetes events
# reach the job-events sink, and no metrics. Images: read on the worker repository
# (cluster.tf, nodes_pull).

resource "google_service_account" "nodes" {
  account_id   = "${var.common_name}-nodes"
  display_name = "cave-pipeline GKE nodes"

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "nodes" {
  project = var.project_id
  role    = "roles/container.defaultNodeServiceAccount" # logs, metrics, node telemetry
  member  = google_service_account.nodes.member
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

# `gcloud functions deploy --service-account/--build-service-account` requires acting as
# those accounts.
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
# kick, reads Jobs/pods/logs/events and pod metrics, writes the pods' Secret, and may pull
# alerts. Kubernetes access is the operators' Role of k8s/pipeline-kubernetes.yaml in the
# namespace (output pipeline_kubernetes_manifest), not a project-wide container role.
# Owners/Editors need none of this.

resource "google_project_iam_member" "operators" {
  for_each = {
    for pair in setproduct(var.operator_members, ["roles/datastore.user", "roles/container.clusterViewer"]) :
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

# Operators may read (and replay by hand) the raw dead-lettered messages.
resource "google_pubsub_subscription_iam_member" "operators_dead_letters" {
  for_each = toset(var.operator_members)

  subscription = google_pubsub_subscription.dead_letters_operator.name
  role         = "roles/pubsub.subscriber"
  member       = each.value
}
