# --- Cloud Functions (gen2): the controller -----------------------------------------------------
#
# Thin entry points (functions/main.py) over one idempotent reconcile(run):
#   on-job-event    <- job-events    (Kubernetes Job events, via the log sink)
#   on-tick         <- ticks         (Cloud Scheduler, every minute)
#   on-kick         <- kick          (operator actions from the pipeline CLI)
# and one that turns a dead letter into an alert:
#   on-dead-letter  <- dead-letters  (messages the three above failed on; see below)
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
# safe, only less tidy. Errors the code classes as transient raise (HTTP 500); Pub/Sub then
# redelivers with backoff (permanent errors are logged and acknowledged).
#
# Delivery: push subscriptions, not Eventarc triggers
# ---------------------------------------------------
# An Eventarc Pub/Sub trigger creates and owns its subscription; the subscription is
# output-only in the Eventarc and Cloud Functions APIs, so it cannot be given a dead-letter
# policy (terraform-provider-google#17697), and a message that keeps failing is retried for
# the topic's 24 hours of retention and then silently dropped. So the functions have no
# event trigger (they are HTTP functions, internal ingress, authenticated) and each topic
# feeds its function through an explicit push subscription below, to the function's Cloud Run
# URL, with
#   * an OIDC token of the `invoker` account (run.invoker on the four functions, nothing else),
#   * retry_policy: exponential backoff 10 s .. 600 s, as Eventarc's retries were,
#   * dead_letter_policy: after `dead_letter_max_attempts` (default 10) deliveries without a
#     2xx the message goes to `dead-letters`, whose function publishes a `message_dead_lettered`
#     alert (shared/control/dead_letters.py) and whose pull subscription keeps the raw message 7 days.
# functions-framework turns the plain push body into the same CloudEvent
# (google.cloud.pubsub.topic.v1.messagePublished, id = message id) Eventarc delivered, so
# functions/main.py is unchanged. The subscriptions are named <topic>-trigger: the dead-letter
# alert derives the original topic from that name.

locals {
  functions_src_dir = "${path.module}/../build/functions-src"

  # The triggers: their messages dead-letter (shared/control/dead_letters.py TRIGGER_FUNCTIONS).
  trigger_functions = {
    "on-job-event" = { entry_point = "on_job_event", topic = "job-events" }
    "on-tick"      = { entry_point = "on_tick", topic = "ticks" }
    "on-kick"      = { entry_point = "on_kick", topic = "kick" }
  }

  functions = merge(local.trigger_functions, {
    "on-dead-letter" = { entry_point = "on_dead_letter", topic = "dead-letters" }
  })

  function_timeout_s = 120

  gke_dns_endpoint = google_container_cluster.pipeline.control_plane_endpoints_config[0].dns_endpoint_config[0].endpoint

  # Read by adapters/wiring.py, adapters/gke/cluster.py and functions/main.py.
  # cloudbuild.yaml writes the same set when it redeploys; keep the two in step.
  function_env = {
    PIPELINE_PROJECT = var.project_id
    PIPELINE_CLUSTER = "gke"
    # The DNS endpoint (https:// is added by the adapter): IAM-gated, a publicly trusted
    # certificate, so no CA and no IP allow-list (cluster.tf).
    PIPELINE_GKE_ENDPOINT    = local.gke_dns_endpoint
    PIPELINE_NAMESPACE       = var.namespace
    PIPELINE_EVENT_MAX_AGE_S = tostring(var.event_max_age_s)
    # The scheduler's period as the functions see it (the tail watch's budget, a tick's age).
    PIPELINE_TICK_PERIOD_S = tostring(var.tick_period_minutes * 60)
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
  # checkov:skip=CKV_GCP_62: holds only content-named source zips terraform itself uploads; Cloud Audit Logs record admin access, and a log bucket would cost more than it shows
  count = var.functions_source_bucket == "" ? 1 : 0

  name                        = "${var.project_id}-${var.common_name}-fn-src"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # only staged source zips live here

  versioning {
    enabled = true # objects are content-named and never overwritten: costs nothing extra
  }

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
  description = "cave-pipeline controller: ${each.value.topic} -> ${each.value.entry_point}"

  build_config {
    runtime           = "python312"
    entry_point       = each.value.entry_point
    service_account   = google_service_account.function_build.id # projects/<p>/serviceAccounts/<email>
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = local.functions_bucket
        object = google_storage_bucket_object.functions_source.name
      }
    }
  }

  service_config {
    # available_memory: sized for the largest layer the config allows (parallelism up to
    # 100,000, plus GKE's 1,000 kept terminated pods, listed every reconcile): ~0.45 CPU-s and
    # ~1.6 MiB kept per 1,000 pods read as JSON, one 500-pod page (~45 MiB) at a time. 2 GiB
    # brings 1 vCPU, so such a reconcile fits in the one-minute tick; 512M (0.333 vCPU) would
    # take about three. Figures: docs/local-cluster.md ("The functions' size");
    # cloudbuild.yaml's --memory must match.
    min_instance_count               = 0
    max_instance_count               = var.max_instances
    max_instance_request_concurrency = 1
    available_memory                 = "2Gi"
    timeout_seconds                  = local.function_timeout_s
    environment_variables            = local.function_env
    service_account_email            = google_service_account.controller.email
    all_traffic_on_latest_revision   = true

    # Only Google-internal callers (the project's Pub/Sub push subscriptions) reach the
    # functions, and only with a token of the invoker account.
    ingress_settings = "ALLOW_INTERNAL_ONLY"
  }

  # No event_trigger: the push subscriptions below deliver (see the header).

  lifecycle {
    # Code updates come from Cloud Build; never roll them back from an older checkout.
    ignore_changes = [build_config[0].source]
  }

  depends_on = [
    google_project_iam_member.controller,
    google_project_iam_member.function_build_logs,
    google_project_iam_member.function_build_reads_source,
    google_artifact_registry_repository_iam_member.function_build_pushes,
    google_firestore_database.default,
  ]
}

# The functions' containers (Cloud Functions builds them as fn-build and pushes them here),
# instead of the shared gcf-artifacts repository the build account would otherwise need
# project-wide write on.
resource "google_artifact_registry_repository" "functions" {
  # checkov:skip=CKV_GCP_84: CMEK needs a Cloud KMS key ring to own and rotate; Google-managed encryption at rest covers rebuildable images
  location      = var.region
  repository_id = "${var.common_name}-functions"
  format        = "DOCKER"
  description   = "cave-pipeline function images (Cloud Functions builds)"

  depends_on = [google_project_service.apis]
}

# The push subscriptions invoke each function's Cloud Run service (same name as the function)
# with the invoker account's token.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = google_cloudfunctions2_function.fn

  location = each.value.location
  name     = each.value.name
  role     = "roles/run.invoker"
  member   = google_service_account.invoker.member
}

# --- The push subscriptions ---------------------------------------------------------------------

locals {
  # Pub/Sub counts a push that gets no answer within the ack deadline as a failed delivery:
  # give the function its whole timeout and some.
  push_ack_deadline_s = local.function_timeout_s + 60
}

# job-events, ticks, kick -> their function; dead letters after dead_letter_max_attempts.
resource "google_pubsub_subscription" "trigger" {
  for_each = local.trigger_functions

  name  = "${each.value.topic}-trigger" # shared/control/dead_letters.py reads the topic from the name
  topic = google_pubsub_topic.topics[each.value.topic].id

  ack_deadline_seconds       = local.push_ack_deadline_s
  message_retention_duration = "86400s" # a day; dead-lettering ends a failing message long before

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.topics["dead-letters"].id
    max_delivery_attempts = var.dead_letter_max_attempts
  }

  push_config {
    push_endpoint = google_cloudfunctions2_function.fn[each.key].service_config[0].uri

    oidc_token {
      service_account_email = google_service_account.invoker.email
      audience              = google_cloudfunctions2_function.fn[each.key].service_config[0].uri
    }
  }

  expiration_policy {
    ttl = "" # never expires, however quiet the topic
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.pubsub_agent_mints_invoker_tokens,
    google_pubsub_topic_iam_member.pubsub_agent_publishes_dead_letters,
  ]
}

# dead-letters -> on-dead-letter (the message_dead_lettered alert). The end of the line: no
# dead-letter policy of its own; it retries with backoff for the week of retention, and the
# raw messages are kept in `dead-letters-operator` (pubsub.tf) either way.
resource "google_pubsub_subscription" "dead_letter_trigger" {
  name  = "dead-letters-trigger"
  topic = google_pubsub_topic.topics["dead-letters"].id

  ack_deadline_seconds       = local.push_ack_deadline_s
  message_retention_duration = "604800s"

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  push_config {
    push_endpoint = google_cloudfunctions2_function.fn["on-dead-letter"].service_config[0].uri

    oidc_token {
      service_account_email = google_service_account.invoker.email
      audience              = google_cloudfunctions2_function.fn["on-dead-letter"].service_config[0].uri
    }
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_service_account_iam_member.pubsub_agent_mints_invoker_tokens,
  ]
}

# Dead-lettering is done by the Pub/Sub service agent: it must be able to acknowledge on the
# source subscription (subscriber there) and to publish on the dead-letter topic.
resource "google_pubsub_subscription_iam_member" "pubsub_agent_acks_triggers" {
  for_each = google_pubsub_subscription.trigger

  subscription = each.value.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

resource "google_pubsub_topic_iam_member" "pubsub_agent_publishes_dead_letters" {
  topic  = google_pubsub_topic.topics["dead-letters"].name
  role   = "roles/pubsub.publisher"
  member = local.pubsub_service_agent
}
