# --- The build dashboard: a build in Cloud Console, live ---------------------------------------
#
# Log-based metrics from the controller's structured lines (one JSON object a line, parsed into
# jsonPayload): after each committed reconcile it logs `run progress` (status, spend) and, per
# running layer, `layer progress` (chunks done of the total, parallelism against the ramp's
# target, pods running, retries): shared/control/build_metrics.py. With the alerts' own entries
# ("alert published", alerts.tf) and each reconcile's `reconciled` line they feed the dashboard
# in dashboard.json. The filters are tested against captured controller lines
# (tests/unit/deploy/test_dashboard.py).

locals {
  layer_progress_filter = "${local.function_logs_filter} AND jsonPayload.message=\"layer progress\""
  run_progress_filter   = "${local.function_logs_filter} AND jsonPayload.message=\"run progress\""
  reconciled_filter     = "${local.function_logs_filter} AND jsonPayload.message=\"reconciled\""

  # The figures of a running layer's entry, each a distribution metric by run, stage, layer.
  layer_figures = {
    chunks_done  = "Chunks built of a running layer"
    chunks_total = "Chunks of a running layer"
    parallelism  = "A running layer's Job parallelism"
    ramp_target  = "The parallelism a running layer's ramp allows now"
    pods_running = "A running layer's pods running or pending"
    retries      = "A running layer's failed pod attempts (retried by the Job)"
  }
}

resource "google_logging_metric" "layer" {
  for_each = local.layer_figures

  name            = "cave-pipeline/${each.key}"
  description     = "cave-pipeline: ${each.value} (the controller's `layer progress` line)"
  filter          = local.layer_progress_filter
  value_extractor = "EXTRACT(jsonPayload.${each.key})"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "1"
    labels {
      key        = "run"
      value_type = "STRING"
    }
    labels {
      key        = "stage"
      value_type = "STRING"
    }
    labels {
      key        = "layer"
      value_type = "STRING"
    }
  }

  label_extractors = {
    run   = "EXTRACT(jsonPayload.run)"
    stage = "EXTRACT(jsonPayload.stage)"
    layer = "EXTRACT(jsonPayload.layer)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 64
      growth_factor      = 2
      scale              = 1
    }
  }
}

resource "google_logging_metric" "spend" {
  name            = "cave-pipeline/spend_usd"
  description     = "cave-pipeline: a run's estimated spend so far, USD (the controller's `run progress` line)"
  filter          = "${local.run_progress_filter} AND jsonPayload.spend_usd>=0"
  value_extractor = "EXTRACT(jsonPayload.spend_usd)"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "USD"
    labels {
      key        = "run"
      value_type = "STRING"
    }
  }

  label_extractors = {
    run = "EXTRACT(jsonPayload.run)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 64
      growth_factor      = 1.5
      scale              = 0.01
    }
  }
}

resource "google_logging_metric" "alerts" {
  name        = "cave-pipeline/alerts"
  description = "cave-pipeline: alerts published, by kind and severity"
  filter      = local.alert_log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "run"
      value_type = "STRING"
    }
    labels {
      key        = "kind"
      value_type = "STRING"
    }
    labels {
      key        = "alert_severity"
      value_type = "STRING"
    }
  }

  label_extractors = {
    run            = "EXTRACT(jsonPayload.run)"
    kind           = "EXTRACT(jsonPayload.kind)"
    alert_severity = "EXTRACT(jsonPayload.alert_severity)"
  }
}

resource "google_logging_metric" "reconciles" {
  name        = "cave-pipeline/reconciles"
  description = "cave-pipeline: reconciles, by trigger and run status"
  filter      = local.reconciled_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "run"
      value_type = "STRING"
    }
    labels {
      key        = "trigger"
      value_type = "STRING"
    }
  }

  label_extractors = {
    run     = "EXTRACT(jsonPayload.run)"
    trigger = "EXTRACT(jsonPayload.trigger)"
  }
}

resource "google_monitoring_dashboard" "build" {
  # The widgets name the metrics above by type (logging.googleapis.com/user/NAME): a test
  # checks each against them and the whole against the Monitoring API's Dashboard schema.
  dashboard_json = file("${path.module}/dashboard.json")

  depends_on = [
    google_logging_metric.layer,
    google_logging_metric.spend,
    google_logging_metric.alerts,
    google_logging_metric.reconciles,
    google_project_service.apis,
  ]
}
