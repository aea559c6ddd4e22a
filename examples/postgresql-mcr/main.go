// An example provider controller on multicluster-runtime with kcp's
// multicluster-provider, unmodified kcp code run against bindery's virtual
// workspace. It does what examples/postgresql_controller.rs does: for each
// PostgreSQLInstance of every consumer of the export that is not Ready, it
// writes the connection credentials as a Secret in the consumer's provider
// namespace (bindery copies it into the app cluster, since the postgresql
// template claims such Secrets), then sets status.phase Ready through that
// consumer's own path of the workspace (the cluster's client).
//
// Two ways to find the consumers ("clusters"), as multicluster-provider
// offers them:
//
//	--mode=apiexport  apiexport.New: the APIExportEndpointSlice named after
//	                  the export, served at <bindery>/services/export/<export>,
//	                  then the APIBindings at its URL's /clusters/*
//	--mode=object     provider.New at <bindery>/services/export/<export>
//	                  with ObjectToWatch: a consumer is engaged by its
//	                  PostgreSQLInstances at /clusters/*
//
// It prints one JSON line per event, for the e2e test (tests/e2e/kcp.rs):
// {"event":"engaged"|"disengaged","cluster":...} and
// {"event":"reconciled","cluster":...,"namespace":...,"name":...,"uid":...,"phase":...}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	"sigs.k8s.io/multicluster-runtime/pkg/clusters"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"

	"github.com/kcp-dev/multicluster-provider/apiexport"
	"github.com/kcp-dev/multicluster-provider/pkg/handlers"
	"github.com/kcp-dev/multicluster-provider/pkg/provider"
)

// PostgreSQLInstance is the provider's CRD, db.example.com/v1.
type PostgreSQLInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PostgreSQLInstanceSpec   `json:"spec,omitempty"`
	Status            PostgreSQLInstanceStatus `json:"status,omitempty"`
}

type PostgreSQLInstanceSpec struct {
	Plan string `json:"plan,omitempty"`
}

type PostgreSQLInstanceStatus struct {
	Phase string `json:"phase,omitempty"`
}

type PostgreSQLInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PostgreSQLInstance `json:"items"`
}

func (in *PostgreSQLInstance) DeepCopyObject() runtime.Object {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (in *PostgreSQLInstanceList) DeepCopyObject() runtime.Object {
	out := *in
	out.Items = make([]PostgreSQLInstance, len(in.Items))
	for i := range in.Items {
		out.Items[i] = *in.Items[i].DeepCopyObject().(*PostgreSQLInstance)
	}
	return &out
}

var instanceGroupVersion = schema.GroupVersion{Group: "db.example.com", Version: "v1"}

// partOf labels the credentials Secrets, so the template's claim covers them.
const partOf = "app.kubernetes.io/part-of"

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apisv1alpha1.AddToScheme(scheme))
	scheme.AddKnownTypes(instanceGroupVersion, &PostgreSQLInstance{}, &PostgreSQLInstanceList{})
	metav1.AddToGroupVersion(scheme, instanceGroupVersion)
	return scheme
}

// report prints one JSON line.
var reportLock sync.Mutex

func report(fields map[string]string) {
	line, _ := json.Marshal(fields)
	reportLock.Lock()
	defer reportLock.Unlock()
	fmt.Println(string(line))
}

// lifecycle reports the clusters multicluster-provider engages and
// disengages (its handlers.Handler).
type lifecycle struct{}

func (lifecycle) OnAdd(obj client.Object) {
	report(map[string]string{"event": "engaged", "cluster": logicalcluster.From(obj).String()})
}
func (lifecycle) OnUpdate(_, _ client.Object) {}
func (lifecycle) OnDelete(obj client.Object) {
	report(map[string]string{"event": "disengaged", "cluster": logicalcluster.From(obj).String()})
}

// direct is provider.New's provider as a multicluster.Provider: the
// consumers of a virtual workspace URL, without an endpoint slice.
type direct struct {
	clusters *provider.Clusters
	inner    *provider.Provider
}

func (d *direct) Get(ctx context.Context, name string) (cluster.Cluster, error) {
	return d.clusters.Get(ctx, name)
}

func (d *direct) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return d.clusters.IndexField(ctx, obj, field, extract)
}

func (d *direct) Start(ctx context.Context, aware multicluster.Aware) error {
	return d.inner.Start(ctx, aware)
}

func main() {
	var (
		mode, server, export, caFile, providerKubeconfig, prefix string
	)
	flag.StringVar(&mode, "mode", "apiexport", "apiexport (endpoint slice and APIBindings) or object (ObjectToWatch)")
	flag.StringVar(&server, "server", "", "bindery's URL, https://<host>:<port>")
	flag.StringVar(&export, "export", "postgresql", "the export's name")
	flag.StringVar(&caFile, "certificate-authority", "", "the CA of bindery's serving certificate")
	flag.StringVar(&providerKubeconfig, "provider-kubeconfig", "", "the provider, where the credentials Secrets are written")
	flag.StringVar(&prefix, "cluster-namespace-prefix", "kube-bind-", "cluster namespaces are <prefix><consumer>")
	flag.Parse()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if err := run(mode, server, export, caFile, providerKubeconfig, prefix); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(mode, server, export, caFile, providerKubeconfig, prefix string) error {
	token := os.Getenv("CONTROLLER_TOKEN")
	if server == "" || token == "" || caFile == "" || providerKubeconfig == "" {
		return fmt.Errorf("--server, --certificate-authority, --provider-kubeconfig and $CONTROLLER_TOKEN are needed")
	}
	// The export's root: its APIExportEndpointSlice is served there, and its
	// URL (the same) is the virtual workspace, to which /clusters/... is added.
	cfg := &rest.Config{
		Host:            strings.TrimSuffix(server, "/") + "/services/export/" + export,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
	}
	providerCfg, err := clientcmd.BuildConfigFromFlags("", providerKubeconfig)
	if err != nil {
		return fmt.Errorf("the provider's kubeconfig: %w", err)
	}
	scheme := newScheme()
	var clusterProvider multicluster.Provider
	switch mode {
	case "apiexport":
		clusterProvider, err = apiexport.New(cfg, export, apiexport.Options{
			Scheme:   scheme,
			Handlers: handlers.Handlers{lifecycle{}},
		})
	case "object":
		clusters := ptr.To(clusters.New[cluster.Cluster]())
		var inner *provider.Provider
		inner, err = provider.New(cfg, clusters, provider.Options{
			Scheme:        scheme,
			ObjectToWatch: &PostgreSQLInstance{},
			Handlers:      handlers.Handlers{lifecycle{}},
		})
		clusterProvider = &direct{clusters: clusters, inner: inner}
	default:
		return fmt.Errorf("unknown --mode %q", mode)
	}
	if err != nil {
		return fmt.Errorf("the cluster provider: %w", err)
	}
	mgr, err := mcmanager.New(cfg, clusterProvider, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("the manager: %w", err)
	}
	providerClient, err := client.New(providerCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("the provider's client: %w", err)
	}
	reconciler := &reconciler{mgr: mgr, provider: providerClient, prefix: prefix}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("postgresql-" + mode).
		For(&PostgreSQLInstance{}).
		Complete(mcreconcile.Func(reconciler.reconcile))
	if err != nil {
		return fmt.Errorf("the controller: %w", err)
	}
	report(map[string]string{"event": "started", "mode": mode})
	return mgr.Start(ctrl.SetupSignalHandler())
}

type reconciler struct {
	mgr      mcmanager.Manager
	provider client.Client
	prefix   string
}

func (r *reconciler) reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	cl, err := r.mgr.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("cluster %q: %w", req.ClusterName, err)
	}
	// Read from the cluster's view of the wildcard cache: the cluster-aware
	// key (cluster, namespace, name) picks this consumer's object even when
	// another consumer has one of the same namespace and name.
	instance := &PostgreSQLInstance{}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, instance); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	reported := map[string]string{
		"event": "reconciled", "cluster": req.ClusterName, "namespace": instance.Namespace,
		"name": instance.Name, "uid": string(instance.UID), "phase": instance.Status.Phase,
		"annotation": instance.Annotations[logicalcluster.AnnotationKey],
	}
	if instance.Status.Phase == "Ready" {
		report(reported)
		return ctrl.Result{}, nil
	}
	if err := r.credentials(ctx, req.ClusterName, instance); err != nil {
		return ctrl.Result{}, err
	}
	// The status, through this consumer's own path of the workspace.
	before := instance.DeepCopyObject().(*PostgreSQLInstance)
	instance.Status.Phase = "Ready"
	if err := cl.GetClient().Status().Patch(ctx, instance, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status: %w", err)
	}
	reported["phase"] = "Ready"
	report(reported)
	return ctrl.Result{}, nil
}

// credentials writes the instance's Secret in the consumer's provider
// namespace, found in its APIServiceNamespace record.
func (r *reconciler) credentials(ctx context.Context, consumer string, instance *PostgreSQLInstance) error {
	record := &unstructured.Unstructured{}
	record.SetGroupVersionKind(schema.GroupVersionKind{Group: "kube-bind.io", Version: "v1alpha2", Kind: "APIServiceNamespace"})
	key := client.ObjectKey{Namespace: r.prefix + consumer, Name: instance.Namespace}
	if err := r.provider.Get(ctx, key, record); err != nil {
		return fmt.Errorf("the provider namespace of %s/%s: %w", consumer, instance.Namespace, err)
	}
	namespace, _, _ := unstructured.NestedString(record.Object, "status", "namespace")
	if namespace == "" {
		return fmt.Errorf("the namespace record %s has no provider namespace yet", key)
	}
	name := instance.Name + "-credentials"
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{partOf: "postgresql"}},
		StringData: map[string]string{
			"host":     fmt.Sprintf("%s.%s.db.example.com", instance.Name, instance.Namespace),
			"username": instance.Name,
			"password": "secret-of-" + string(instance.UID),
		},
	}
	if err := r.provider.Patch(ctx, secret, client.Apply, client.FieldOwner("postgresql-controller"), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the credentials: %w", err)
	}
	return nil
}
