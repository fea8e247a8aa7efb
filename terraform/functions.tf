# --- Cloud Functions (gen2): the controller -----------------------------------------------------
#
# Three thin entry points (functions/main.py) over one idempotent reconcile(run):
#   on-job-event  <- job-events  (Kubernetes Job events, via the log sink)
#   on-tick       <- ticks       (Cloud Scheduler, every minute)
#   on-kick       <- kick        (operator actions from the pipeline CLI)
#
# Source: scripts/stage_functions.sh lays out build/functions-src (main.py at the root, the
# `shared` package, requirements.txt); terraform zips it, uploads it, and creates the functions
# from it. Afterwards Cloud Build deploys code updates (cloudbuild.yaml) and terraform ignores
# the source (see main.tf, "Who owns what").
#
# Each function runs at most `max_instances` (default 1) instances with one request each, so in
# practice the reconciles of a run are serialized and a burst of events queues in Pub/Sub
# instead of fanning out. Correctness does not rest on that: every state transition is a
# Firestore transaction with a precondition on the previous state, Job creation is idempotent
# (deterministic names), and duplicate deliveries are deduplicated - raising max_instances is
# safe, only less tidy. Errors the code classes as transient raise; RETRY_POLICY_RETRY makes
# Pub/Sub redeliver them with backoff (permanent errors are logged and acknowledged).

locals {
  functions_src_dir = "${path.module}/../build/functions-src"

  functions = {
    "on-job-event" = { entry_point = "on_job_event", topic = "job-events" }
    "on-tick"      = { entry_point = "on_tick", topic = "ticks" }
    "on-kick"      = { entry_point = "on_kick", topic = "kick" }
  }

  # Read by shared/adapters/wiring.py, shared/adapters/gke_cluster.py and functions/main.py.
  # cloudbuild.yaml writes the same set when it redeploys; keep the two in step.
  function_env = {
    PIPELINE_PROJECT         = var.project_id
    PIPELINE_CLUSTER         = "gke"
    PIPELINE_GKE_ENDPOINT    = google_container_cluster.pipeline.endpoint                              # IP; https:// is added by the adapter
    PIPELINE_GKE_CA          = google_container_cluster.pipeline.master_auth[0].cluster_ca_certificate # base64 PEM
    PIPELINE_NAMESPACE       = var.namespace
    PIPELINE_EVENT_MAX_AGE_S = tostring(var.event_max_age_s)
    # Gen2 deploys add this (execution ids in the logs); setting it avoids a permanent diff.
    LOG_EXECUTION_ID = "true"
  }

  functions_bucket = (
    var.functions_source_bucket != ""
    ? var.functions_source_bucket
    : one(google_storage_bucket.functions_source[*].name)
  )
}

resource "google_storage_bucket" "functions_source" {
  count = var.functions_source_bucket == "" ? 1 : 0

  name                        = "${var.project_id}-${var.common_name}-fn-src"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # only staged source zips live here

  depends_on = [google_project_service.apis]
}

data "archive_file" "functions_source" {
  type        = "zip"
  source_dir  = local.functions_src_dir
  output_path = "${path.module}/../build/functions-src.zip"

  lifecycle {
    precondition {
      condition     = fileexists("${local.functions_src_dir}/main.py")
      error_message = "build/functions-src is missing: run scripts/stage_functions.sh from the repository root first."
    }
  }
}

# Named by content, so a re-staged source is a new object (used on create and on -replace).
resource "google_storage_bucket_object" "functions_source" {
  name         = "functions-src/${data.archive_file.functions_source.output_md5}.zip"
  bucket       = local.functions_bucket
  source       = data.archive_file.functions_source.output_path
  content_type = "application/zip"
}

resource "google_cloudfunctions2_function" "fn" {
  for_each = local.functions

  name        = each.key
  location    = var.region
  description = "cave-pipeline controller: ${each.value.topic} -> reconcile"

  build_config {
    runtime         = "python312"
    entry_point     = each.value.entry_point
    service_account = google_service_account.function_build.id # projects/<p>/serviceAccounts/<email>

    source {
      storage_source {
        bucket = local.functions_bucket
        object = google_storage_bucket_object.functions_source.name
      }
    }
  }

  service_config {
    min_instance_count               = 0
    max_instance_count               = var.max_instances
    max_instance_request_concurrency = 1
    available_memory                 = "512M"
    timeout_seconds                  = 120
    environment_variables            = local.function_env
    service_account_email            = google_service_account.controller.email
    all_traffic_on_latest_revision   = true

    # Only Google-internal callers (Eventarc/Pub/Sub of this project) can reach the functions.
    ingress_settings = "ALLOW_INTERNAL_ONLY"
  }

  event_trigger {
    trigger_region        = var.region
    event_type            = "google.cloud.pubsub.topic.v1.messagePublished"
    pubsub_topic          = google_pubsub_topic.topics[each.value.topic].id
    retry_policy          = "RETRY_POLICY_RETRY"
    service_account_email = google_service_account.controller.email
  }

  lifecycle {
    # Code updates come from Cloud Build; never roll them back from an older checkout.
    ignore_changes = [build_config[0].source]
  }

  depends_on = [
    google_project_iam_member.controller,
    google_project_iam_member.function_build,
    google_service_account_iam_member.pubsub_agent_mints_controller_tokens,
    google_firestore_database.default,
  ]
}

# Eventarc invokes each function's Cloud Run service as the controller account. A gen2
# function's service has the function's name.
resource "google_cloud_run_v2_service_iam_member" "controller_invokes" {
  for_each = google_cloudfunctions2_function.fn

  location = each.value.location
  name     = each.value.name
  role     = "roles/run.invoker"
  member   = google_service_account.controller.member
}
