output "kubernetes_cluster_context" {
  description = "Run this to point kubectl (and the pipeline CLI) at the cluster through its DNS endpoint (IAM-gated: no allow-list)."
  value       = "gcloud container clusters get-credentials ${google_container_cluster.pipeline.name} --region ${google_container_cluster.pipeline.location} --project ${var.project_id} --dns-endpoint"
}

output "cluster_dns_endpoint" {
  description = "The control plane's DNS-based endpoint (the functions' PIPELINE_GKE_ENDPOINT)."
  value       = local.gke_dns_endpoint
}

output "worker_service_account" {
  description = "Google service account of the layer Jobs' pods: pipeline.yml workload_identity.gsa_email."
  value       = google_service_account.worker.email
}

output "setup_service_account" {
  description = "Google service account of the setup Jobs' pods (bigtable.admin on the instance)."
  value       = google_service_account.setup.email
}

output "pipeline_kubernetes_manifest" {
  description = "The namespace, the pods' service accounts, the controller's and the operators' Roles: terraform output -raw pipeline_kubernetes_manifest | kubectl apply -f -"
  value = templatefile("${path.module}/k8s/pipeline-kubernetes.yaml", {
    namespace  = var.namespace
    worker_ksa = var.worker_ksa
    worker_gsa = google_service_account.worker.email
    setup_ksa  = var.setup_ksa
    setup_gsa  = google_service_account.setup.email
    controller_subjects = jsonencode([
      { kind = "User", name = google_service_account.controller.email },
    ])
    operator_subjects = jsonencode([
      for member in var.operator_members : {
        kind = startswith(member, "group:") ? "Group" : "User"
        name = split(":", member)[1]
      }
    ])
  })
}

output "controller_service_account" {
  description = "Service account the functions run as."
  value       = google_service_account.controller.email
}

output "invoker_service_account" {
  description = "Service account the push subscriptions invoke the functions as."
  value       = google_service_account.invoker.email
}

output "node_service_account" {
  description = "Service account of the Autopilot nodes."
  value       = google_service_account.nodes.email
}

output "function_build_service_account" {
  description = "Service account that builds the functions' containers."
  value       = google_service_account.function_build.email
}

output "deployer_service_account" {
  description = "Service account for the Cloud Build trigger running cloudbuild.yaml."
  value       = google_service_account.deployer.email
}

output "topics" {
  description = "Pub/Sub topics by role."
  value       = { for name, topic in google_pubsub_topic.topics : name => topic.id }
}

output "alerts_subscription" {
  description = "Pull subscription for people: gcloud pubsub subscriptions pull alerts-operator --auto-ack"
  value       = google_pubsub_subscription.alerts_operator.id
}

output "dead_letters_subscription" {
  description = "Pull subscription keeping dead-lettered messages 7 days: gcloud pubsub subscriptions pull dead-letters-operator --format=json"
  value       = google_pubsub_subscription.dead_letters_operator.id
}

output "functions" {
  description = "The controller's functions."
  value       = { for name, fn in google_cloudfunctions2_function.fn : name => fn.id }
}

output "worker_image_repository" {
  description = "Where cloudbuild.yaml pushes worker:<tag> and worker-demo:<tag> (pipeline.yml `images`)."
  value       = "${google_artifact_registry_repository.images.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}

output "cloudbuild_substitutions" {
  description = "Substitutions for `gcloud builds submit --config cloudbuild.yaml` (add _TAG=<git sha>)."
  value = join(",", [
    "_REGION=${var.region}",
    "_REPO=${google_artifact_registry_repository.images.repository_id}",
    "_CLUSTER=${google_container_cluster.pipeline.name}",
    "_NAMESPACE=${var.namespace}",
    "_CONTROLLER_SA=${google_service_account.controller.email}",
    "_BUILD_SA=${google_service_account.function_build.email}",
    "_MAX_INSTANCES=${var.max_instances}",
    "_EVENT_MAX_AGE_S=${var.event_max_age_s}",
    "_TICK_PERIOD_S=${var.tick_period_minutes * 60}",
  ])
}

output "build_dashboard_url" {
  description = "The build dashboard in Cloud Console (dashboard.tf, docs/alerts.md#the-build-dashboard)."
  # The dashboard's id is projects/<number>/dashboards/<id>.
  value = "https://console.cloud.google.com/monitoring/dashboards/builder/${element(split("/", google_monitoring_dashboard.build.id), 3)}?project=${var.project_id}"
}
