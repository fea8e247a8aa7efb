# --- Topics ------------------------------------------------------------------------------------
#
# Message schemas are documented in the code that owns them (adapters/google/pubsub_bus.py,
# shared/control/dead_letters.py):
#   job-events    a Cloud Logging LogEntry (JSON) of a Kubernetes Job event, from the sink below
#   ticks         the heartbeat, from Cloud Scheduler below
#   kick          operator actions {"run_id", "action", "by"}, from the pipeline CLI
#   alerts        alert bodies (JSON) with a `kind` attribute, from the controller
#   dead-letters  messages of the three above that failed dead_letter_max_attempts deliveries,
#                 as published, plus Pub/Sub's CloudPubSubDeadLetter* attributes
#
# The functions' push subscriptions (<topic>-trigger) are in functions.tf.

resource "google_pubsub_topic" "topics" {
  # checkov:skip=CKV_GCP_83: CMEK needs a Cloud KMS key to own and rotate; messages are short-lived control signals, Google-managed encryption at rest
  for_each = local.topics

  name = each.value

  depends_on = [google_project_service.apis]
}

# --- Alerts for people -------------------------------------------------------------------------
#
# A pull subscription that keeps a week of alerts:
#
#   gcloud pubsub subscriptions pull alerts-operator --auto-ack --limit=20
#
# Anyone else subscribes with their own subscription on the topic, e.g.
#
#   gcloud pubsub subscriptions create alerts-$USER --topic=alerts
#   gcloud pubsub subscriptions create alerts-failed --topic=alerts --message-filter='attributes.kind = "layer_failed"'
#
# For e-mail or chat, point a push subscription (or a small function) at the notifier of your
# choice, or alert on the topic from Cloud Monitoring; the `kind` attribute lets either filter.

resource "google_pubsub_subscription" "alerts_operator" {
  name  = "alerts-operator"
  topic = google_pubsub_topic.topics["alerts"].id

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s" # 7 days: an operator back from a weekend sees them

  expiration_policy {
    ttl = "" # never expires, even when nobody pulls for a while
  }
}

# --- Dead letters for people ------------------------------------------------------------------
#
# Every dead letter raises a `message_dead_lettered` alert (on-dead-letter) with an excerpt of
# the payload; the whole message stays here for a week, to read or to replay after a fix:
#
#   gcloud pubsub subscriptions pull dead-letters-operator --limit=10 --format=json
#   # replay one (e.g. a kick):  gcloud pubsub topics publish kick --message='<data>'

resource "google_pubsub_subscription" "dead_letters_operator" {
  name  = "dead-letters-operator"
  topic = google_pubsub_topic.topics["dead-letters"].id

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  expiration_policy {
    ttl = ""
  }
}

# --- Kubernetes Job events -> job-events ------------------------------------------------------
#
# GKE writes Kubernetes events to Cloud Logging (log `events`; events about Jobs, which have no
# monitored-resource type of their own, are attributed to `k8s_cluster`). The sink forwards each
# matching LogEntry as JSON in a Pub/Sub message - the shape shared/control/job_events.py parses. Events
# are hints (lossy, rate-limited); the minute tick reconciles whatever they miss.

locals {
  job_events_filter = join(" AND ", [
    "logName=\"projects/${var.project_id}/logs/events\"",
    "resource.type=\"k8s_cluster\"",
    "resource.labels.cluster_name=\"${google_container_cluster.pipeline.name}\"",
    "jsonPayload.involvedObject.kind=\"Job\"",
    "jsonPayload.involvedObject.namespace=\"${var.namespace}\"",
  ])
}

resource "google_logging_project_sink" "job_events" {
  name        = "${var.common_name}-job-events"
  description = "Kubernetes Job events of ${google_container_cluster.pipeline.name} -> Pub/Sub job-events"
  destination = "pubsub.googleapis.com/${google_pubsub_topic.topics["job-events"].id}"
  filter      = local.job_events_filter

  unique_writer_identity = true
}

# The sink writes as its own service account (writer_identity is "serviceAccount:...").
resource "google_pubsub_topic_iam_member" "sink_publishes_job_events" {
  topic  = google_pubsub_topic.topics["job-events"].name
  role   = "roles/pubsub.publisher"
  member = google_logging_project_sink.job_events.writer_identity
}

# --- The heartbeat -> ticks --------------------------------------------------------------------
#
# on-tick reconciles every active run: ramps, stall detection, cost roll-ups, and whatever the
# lossy Job events missed. Its body is not read (the function uses its own clock).

resource "google_cloud_scheduler_job" "tick" {
  name        = "${var.common_name}-tick"
  description = "cave-pipeline heartbeat: publishes to the ticks topic"
  region      = var.region
  schedule    = var.tick_period_minutes == 1 ? "* * * * *" : "*/${var.tick_period_minutes} * * * *"
  time_zone   = "Etc/UTC"

  pubsub_target {
    topic_name = google_pubsub_topic.topics["ticks"].id
    data       = base64encode(jsonencode({ at = "tick" }))
  }

  depends_on = [google_project_service.apis]
}
