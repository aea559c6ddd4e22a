// Informers of one bound resource, as an app cluster's controllers run them:
// a client-go dynamic informer and a metadata informer (client-go v0.34.10),
// both on one namespace. Each notification is printed as one JSON line; once
// both have synced, {"synced":true} is printed; when stdin closes, each
// informer's store is printed ({"informer":…,"store":{name: resourceVersion}})
// and the program exits.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(v any) {
	out.Lock()
	defer out.Unlock()
	if err := out.enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "writing stdout:", err)
		os.Exit(1)
	}
}

type notification struct {
	Informer string `json:"informer"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	Version  string `json:"rv"`
	Previous string `json:"previous,omitempty"`
	// A deletion the informer learnt of from a relist, not a watch event.
	Tombstone bool `json:"tombstone,omitempty"`
}

func handler(informer string) cache.ResourceEventHandler {
	meta := func(obj any) metav1.Object {
		o, err := meta_accessor(obj)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: not an object: %T\n", informer, obj)
			os.Exit(1)
		}
		return o
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			o := meta(obj)
			emit(notification{Informer: informer, Type: "add", Name: o.GetName(), Version: o.GetResourceVersion()})
		},
		UpdateFunc: func(old, obj any) {
			o := meta(obj)
			emit(notification{Informer: informer, Type: "update", Name: o.GetName(), Version: o.GetResourceVersion(),
				Previous: meta(old).GetResourceVersion()})
		},
		DeleteFunc: func(obj any) {
			tombstone := false
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				tombstone, obj = true, t.Obj
			}
			o := meta(obj)
			emit(notification{Informer: informer, Type: "delete", Name: o.GetName(), Version: o.GetResourceVersion(),
				Tombstone: tombstone})
		},
	}
}

func meta_accessor(obj any) (metav1.Object, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T", obj)
	}
	return o, nil
}

func store(informer string, indexer cache.Store) {
	versions := map[string]string{}
	for _, obj := range indexer.List() {
		o, err := meta_accessor(obj)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s store: %v\n", informer, err)
			os.Exit(1)
		}
		versions[o.GetName()] = o.GetResourceVersion()
	}
	emit(map[string]any{"informer": informer, "store": versions})
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the app cluster's kubeconfig")
	group := flag.String("group", "", "API group")
	version := flag.String("version", "", "API version")
	resource := flag.String("resource", "", "resource (plural)")
	namespace := flag.String("namespace", "", "namespace")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	gvr := schema.GroupVersionResource{Group: *group, Version: *version, Resource: *resource}
	dynamicInformer := dynamicinformer.NewFilteredDynamicSharedInformerFactory(
		dynamic.NewForConfigOrDie(config), 0, *namespace, nil).ForResource(gvr).Informer()
	metadataInformer := metadatainformer.NewFilteredSharedInformerFactory(
		metadata.NewForConfigOrDie(config), 0, *namespace, nil).ForResource(gvr).Informer()
	if _, err := dynamicInformer.AddEventHandler(handler("client-go")); err != nil {
		panic(err)
	}
	if _, err := metadataInformer.AddEventHandler(handler("metadata")); err != nil {
		panic(err)
	}
	stop := make(chan struct{})
	go dynamicInformer.Run(stop)
	go metadataInformer.Run(stop)
	deadline := time.After(2 * time.Minute)
	synced := make(chan bool)
	go func() {
		synced <- cache.WaitForCacheSync(stop, dynamicInformer.HasSynced, metadataInformer.HasSynced)
	}()
	select {
	case ok := <-synced:
		if !ok {
			fmt.Fprintln(os.Stderr, "the informers never synced")
			os.Exit(1)
		}
	case <-deadline:
		fmt.Fprintln(os.Stderr, "the informers did not sync in 2 minutes")
		os.Exit(1)
	}
	emit(map[string]bool{"synced": true})
	input := bufio.NewScanner(os.Stdin)
	for input.Scan() {
	}
	store("client-go", dynamicInformer.GetStore())
	store("metadata", metadataInformer.GetStore())
	close(stop)
}
