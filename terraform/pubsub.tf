# --- Topics ------------------------------------------------------------------------------------
#
# Message schemas are documented in the code that owns them (shared/adapters/pubsub_bus.py):
#   job-events  a Cloud Logging LogEntry (JSON) of a Kubernetes Job event, from the sink below
#   ticks       the heartbeat, from Cloud Scheduler below
#   kick        operator actions {"run_id", "action", "by"}, from the pipeline CLI
#   alerts      alert bodies (JSON) with a `kind` attribute, from the controller
#
# The functions' trigger subscriptions are created and owned by Eventarc (functions.tf).

resource "google_pubsub_topic" "topics" {
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

# --- Kubernetes Job events -> job-events ------------------------------------------------------
#
# GKE writes Kubernetes events to Cloud Logging (log `events`; events about Jobs, which have no
# monitored-resource type of their own, are attributed to `k8s_cluster`). The sink forwards each
# matching LogEntry as JSON in a Pub/Sub message - the shape shared/job_events.py parses. Events
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
  schedule    = var.tick_schedule
  time_zone   = "Etc/UTC"

  pubsub_target {
    topic_name = google_pubsub_topic.topics["ticks"].id
    data       = base64encode(jsonencode({ at = "tick" }))
  }

  depends_on = [google_project_service.apis]
}
