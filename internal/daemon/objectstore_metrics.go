package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/forkbox/forkbox/internal/images"
)

// watchObjectStore reports obj's traffic and cache in the metrics; nil
// (images on local disk) reports nothing.
func (m *metrics) watchObjectStore(obj *images.ObjectStore) {
	if obj != nil {
		m.reg.MustRegister(objectStoreCollector{obj})
	}
}

// objectStoreCollector reports what this node moved to and from the
// object store (--object-store) and how its local image cache serves:
// the cluster's image traffic, per node.
type objectStoreCollector struct{ obj *images.ObjectStore }

var (
	descOSBlobs = prometheus.NewDesc("forkbox_object_store_blobs_total",
		"Blobs this node uploaded to the object store, found there already (not uploaded again) or downloaded.", []string{"op"}, nil)
	descOSBytes = prometheus.NewDesc("forkbox_object_store_bytes_total",
		"Bytes this node uploaded to (up) and downloaded from (down) the object store.", []string{"direction"}, nil)
	descOSImages = prometheus.NewDesc("forkbox_object_store_images_total",
		"Whole images (every blob of one) this node uploaded (up) or downloaded (down).", []string{"direction"}, nil)
	descOSSeconds = prometheus.NewDesc("forkbox_object_store_transfer_seconds_total",
		"Time those image transfers took; over forkbox_object_store_images_total, their mean latency.", []string{"direction"}, nil)
	descCacheLookups = prometheus.NewDesc("forkbox_image_cache_lookups_total",
		"Opens of an image that found it in this node's cache (hit) or downloaded it (miss).", []string{"result"}, nil)
	descCacheBytes = prometheus.NewDesc("forkbox_image_cache_bytes",
		"Bytes of images in this node's local cache (--image-cache-size bounds it).", nil, nil)
	descCacheImages = prometheus.NewDesc("forkbox_image_cache_images",
		"Images in this node's local cache.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c objectStoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOSBlobs, descOSBytes, descOSImages, descOSSeconds, descCacheLookups, descCacheBytes, descCacheImages} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c objectStoreCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.obj.Stats()
	counter := func(d *prometheus.Desc, v float64, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, label)
	}
	counter(descOSBlobs, float64(st.Uploaded.Load()), "uploaded")
	counter(descOSBlobs, float64(st.Skipped.Load()), "skipped")
	counter(descOSBlobs, float64(st.Downloaded.Load()), "downloaded")
	counter(descOSBytes, float64(st.UpBytes.Load()), "up")
	counter(descOSBytes, float64(st.DownBytes.Load()), "down")
	counter(descOSImages, float64(st.Uploads.Load()), "up")
	counter(descOSImages, float64(st.Downloads.Load()), "down")
	counter(descOSSeconds, time.Duration(st.UpNanos.Load()).Seconds(), "up")
	counter(descOSSeconds, time.Duration(st.DownNanos.Load()).Seconds(), "down")
	counter(descCacheLookups, float64(st.CacheHits.Load()), "hit")
	counter(descCacheLookups, float64(st.CacheMisses.Load()), "miss")
	bytes, n := c.obj.CacheUsage()
	ch <- prometheus.MustNewConstMetric(descCacheBytes, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(descCacheImages, prometheus.GaugeValue, float64(n))
}
