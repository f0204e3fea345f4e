package csi

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

// manifestDir holds the Kubernetes manifests (deploy/kubernetes).
const manifestDir = "../deploy/kubernetes"

// kustomization is the part of a kustomization.yaml the manifests use.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// decoded is every object of the manifests, by kind.
type decoded struct {
	drivers   []storagev1.CSIDriver
	classes   []storagev1.StorageClass
	daemons   []appsv1.DaemonSet
	pods      []corev1.Pod
	claims    []corev1.PersistentVolumeClaim
	volumes   []corev1.PersistentVolume
	accounts  []corev1.ServiceAccount
	roles     []rbacv1.ClusterRole
	bindings  []rbacv1.ClusterRoleBinding
	spaces    []corev1.Namespace
	kustomize []kustomization
	policies  []admissionv1.ValidatingAdmissionPolicy
	pbindings []admissionv1.ValidatingAdmissionPolicyBinding
}

// strict decodes one document into v, failing on any field v's type
// does not have.
func strict(t *testing.T, file string, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// decodeManifests decodes every YAML file under dir strictly into the
// k8s.io/api type of its kind; an unknown kind fails.
func decodeManifests(t *testing.T, dir string) *decoded {
	t.Helper()
	d := &decoded{}
	var files []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no manifests in %s", dir)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s document %d: %v", file, i, err)
			}
			switch head.APIVersion + " " + head.Kind {
			case "storage.k8s.io/v1 CSIDriver":
				d.drivers = append(d.drivers, storagev1.CSIDriver{})
				strict(t, file, doc, &d.drivers[len(d.drivers)-1])
			case "storage.k8s.io/v1 StorageClass":
				d.classes = append(d.classes, storagev1.StorageClass{})
				strict(t, file, doc, &d.classes[len(d.classes)-1])
			case "apps/v1 DaemonSet":
				d.daemons = append(d.daemons, appsv1.DaemonSet{})
				strict(t, file, doc, &d.daemons[len(d.daemons)-1])
			case "v1 Pod":
				d.pods = append(d.pods, corev1.Pod{})
				strict(t, file, doc, &d.pods[len(d.pods)-1])
			case "v1 PersistentVolumeClaim":
				d.claims = append(d.claims, corev1.PersistentVolumeClaim{})
				strict(t, file, doc, &d.claims[len(d.claims)-1])
			case "v1 PersistentVolume":
				d.volumes = append(d.volumes, corev1.PersistentVolume{})
				strict(t, file, doc, &d.volumes[len(d.volumes)-1])
			case "v1 ServiceAccount":
				d.accounts = append(d.accounts, corev1.ServiceAccount{})
				strict(t, file, doc, &d.accounts[len(d.accounts)-1])
			case "v1 Namespace":
				d.spaces = append(d.spaces, corev1.Namespace{})
				strict(t, file, doc, &d.spaces[len(d.spaces)-1])
			case "rbac.authorization.k8s.io/v1 ClusterRole":
				d.roles = append(d.roles, rbacv1.ClusterRole{})
				strict(t, file, doc, &d.roles[len(d.roles)-1])
			case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
				d.bindings = append(d.bindings, rbacv1.ClusterRoleBinding{})
				strict(t, file, doc, &d.bindings[len(d.bindings)-1])
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
				d.policies = append(d.policies, admissionv1.ValidatingAdmissionPolicy{})
				strict(t, file, doc, &d.policies[len(d.policies)-1])
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
				d.pbindings = append(d.pbindings, admissionv1.ValidatingAdmissionPolicyBinding{})
				strict(t, file, doc, &d.pbindings[len(d.pbindings)-1])
			case "kustomize.config.k8s.io/v1beta1 Kustomization":
				var k kustomization
				strict(t, file, doc, &k)
				for _, r := range k.Resources {
					if _, err := os.Stat(filepath.Join(filepath.Dir(file), r)); err != nil {
						t.Errorf("%s: resource %s: %v", file, r, err)
					}
				}
				d.kustomize = append(d.kustomize, k)
			default:
				t.Fatalf("%s document %d: kind %q of %q has no decoder in this test", file, i, head.Kind, head.APIVersion)
			}
		}
	}
	return d
}

// TestManifests decodes deploy/kubernetes strictly into the k8s.io/api
// types (an unknown or misspelt field fails) and checks that the pieces
// name each other: the driver's name everywhere, the socket kubelet is
// told about, the volume attributes and StorageClass parameters the
// driver reads.
func TestManifests(t *testing.T) {
	d := decodeManifests(t, manifestDir)
	if len(d.drivers) != 1 || len(d.daemons) != 1 || len(d.classes) != 1 || len(d.kustomize) != 1 {
		t.Fatalf("want one CSIDriver, DaemonSet, StorageClass and kustomization; got %d, %d, %d, %d",
			len(d.drivers), len(d.daemons), len(d.classes), len(d.kustomize))
	}
	drv := d.drivers[0]
	if drv.Name != DefaultName {
		t.Errorf("CSIDriver %q, the driver's default name is %q", drv.Name, DefaultName)
	}
	if drv.Spec.AttachRequired == nil || *drv.Spec.AttachRequired {
		t.Error("CSIDriver must say attachRequired: false (the driver has no ControllerPublish)")
	}
	for _, m := range []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral} {
		if !slices.Contains(drv.Spec.VolumeLifecycleModes, m) {
			t.Errorf("CSIDriver lacks volume lifecycle mode %s", m)
		}
	}

	// Every pod's CSI volume names the driver, with attributes the driver
	// accepts.
	inline := 0
	for _, p := range d.pods {
		for _, v := range p.Spec.Volumes {
			if v.CSI == nil {
				continue
			}
			inline++
			if v.CSI.Driver != drv.Name {
				t.Errorf("pod %s volume %s names driver %q, the CSIDriver is %q", p.Name, v.Name, v.CSI.Driver, drv.Name)
			}
			if _, err := parseVolumeAttrs("csi-example", v.CSI.VolumeAttributes); err != nil {
				t.Errorf("pod %s volume %s: %v", p.Name, v.Name, err)
			}
		}
	}
	if inline == 0 {
		t.Error("no example pod with an inline CSI volume")
	}
	for _, pv := range d.volumes {
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != drv.Name {
			t.Errorf("PersistentVolume %s does not name driver %q", pv.Name, drv.Name)
			continue
		}
		if _, err := parseVolumeAttrs(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.VolumeAttributes); err != nil {
			t.Errorf("PersistentVolume %s: %v", pv.Name, err)
		}
	}

	// The policy that ties an inline volume's user to the namespace
	// names the driver, and is bound.
	for _, p := range d.policies {
		named := false
		for _, v := range p.Spec.Validations {
			named = named || strings.Contains(v.Expression, "'"+drv.Name+"'")
		}
		if !named {
			t.Errorf("policy %s does not name driver %q", p.Name, drv.Name)
		}
		bound := false
		for _, b := range d.pbindings {
			bound = bound || b.Spec.PolicyName == p.Name
		}
		if !bound {
			t.Errorf("policy %s has no binding", p.Name)
		}
	}

	sc := d.classes[0]
	if sc.Provisioner != drv.Name {
		t.Errorf("StorageClass %s provisioner %q, the CSIDriver is %q", sc.Name, sc.Provisioner, drv.Name)
	}
	if _, err := parseCreateParams(sc.Parameters); err != nil {
		t.Errorf("StorageClass %s: %v", sc.Name, err)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("StorageClass %s must bind WaitForFirstConsumer: a node's store serves that node", sc.Name)
	}
	for _, c := range d.claims {
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != sc.Name {
			t.Errorf("claim %s does not use StorageClass %s", c.Name, sc.Name)
		}
	}

	// The DaemonSet: the plugin privileged, with /dev/fuse and kubelet's
	// directory shared both ways; the registrar tells kubelet the socket
	// under plugins/<driver name>.
	ds := d.daemons[0]
	var plugin, registrar *corev1.Container
	for i, c := range ds.Spec.Template.Spec.Containers {
		switch c.Name {
		case "shedfs":
			plugin = &ds.Spec.Template.Spec.Containers[i]
		case "node-driver-registrar":
			registrar = &ds.Spec.Template.Spec.Containers[i]
		}
	}
	if plugin == nil || registrar == nil {
		t.Fatal("the DaemonSet lacks the shedfs or node-driver-registrar container")
	}
	if plugin.SecurityContext == nil || plugin.SecurityContext.Privileged == nil || !*plugin.SecurityContext.Privileged {
		t.Error("the shedfs container must be privileged")
	}
	bidir := false
	for _, m := range plugin.VolumeMounts {
		if m.MountPath == "/var/lib/kubelet" && m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
			bidir = true
		}
	}
	if !bidir {
		t.Error("the shedfs container must mount /var/lib/kubelet with mountPropagation Bidirectional")
	}
	hostPaths := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	if !slices.Contains(slices.Collect(maps.Values(hostPaths)), "/dev/fuse") {
		t.Error("the DaemonSet does not give /dev/fuse")
	}
	args := strings.Join(plugin.Args, " ")
	if !strings.Contains(args, "--csi=unix:///csi/csi.sock") || (strings.Contains(args, "--csi-name") && !strings.Contains(args, "--csi-name="+drv.Name)) {
		t.Errorf("shedfs args %q: want --csi=unix:///csi/csi.sock and the driver's name", args)
	}
	want := "--kubelet-registration-path=/var/lib/kubelet/plugins/" + drv.Name + "/csi.sock"
	if !slices.Contains(registrar.Args, want) {
		t.Errorf("registrar args %v lack %s", registrar.Args, want)
	}
	if got := hostPaths["plugin-dir"]; got != "/var/lib/kubelet/plugins/"+drv.Name {
		t.Errorf("plugin-dir is %q, kubelet is told /var/lib/kubelet/plugins/%s", got, drv.Name)
	}

	// The kustomization lists every manifest of the driver (the
	// examples are applied on their own).
	top, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range top {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(d.kustomize[0].Resources, base) {
			t.Errorf("kustomization.yaml does not list %s", base)
		}
	}
}

// TestManifestsStrict checks that the decoding refuses what it must: a
// misspelt field.
func TestManifestsStrict(t *testing.T) {
	var p corev1.Pod
	err := yaml.UnmarshalStrict([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  volumes:\n    - name: w\n      csi:\n        drivr: csi.shedfs.io\n"), &p)
	if err == nil || !strings.Contains(err.Error(), "drivr") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}
