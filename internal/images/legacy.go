package images

import "path/filepath"

// LegacyRef returns the entry a path names in records written before
// records named content by ref (a sandbox's or template's RootFS, a
// template's ImageDir): <root>/layers/<key> is a layer, <root>/images/<key>
// (the old name of templates/) or <root>/templates/<key> a template image.
// Only the migration of such records at start uses it: references are
// recorded as refs, never derived from paths.
func LegacyRef(path string) (ContentRef, bool) {
	if path == "" {
		return ContentRef{}, false
	}
	p := filepath.Clean(path)
	kind, key := filepath.Base(filepath.Dir(p)), filepath.Base(p)
	ref := ContentRef{ContentKind(kind), key}
	if kind == "images" {
		ref.Kind = KindTemplateImage
	}
	if ref.Validate() != nil {
		return ContentRef{}, false
	}
	return ref, true
}

// LegacyContent is the Content of a record written before records named
// content by ref, from its root filesystem and image paths (see
// LegacyRef): a layer and a template image, where they are entries.
func LegacyContent(rootfs, imageDir string) []ContentRef {
	var refs []ContentRef
	if ref, ok := LegacyRef(rootfs); ok && ref.Kind == KindLayer {
		refs = append(refs, ref)
	}
	if ref, ok := LegacyRef(imageDir); ok && ref.Kind == KindTemplateImage {
		refs = append(refs, ref)
	}
	return refs
}
