// Package vision decodes and augments images as torchvision's transforms
// do: a JPEG or PNG decoded (the standard library's decoders), cropped at
// random (RandomResizedCrop) or in the centre, resized (PIL's bilinear
// resampling, widened when it shrinks), flipped left to right, and
// normalised into float32 CHW or HWC, the resize fused with the rest. Every random choice is drawn from (seed, epoch,
// sample id), so augmentation is a function of the sample and its epoch:
// the same after a restart or a resume.
//
// A Map runs a Transform over a batch's slot of encoded images on several
// goroutines. An image's declared size is checked before it is decoded
// (MaxPixels); one that does not decode is ErrImage, named by its sample,
// in a format.BadSamples that a pipeline under the skip policy drops.
//
// vision imports tensor, readers/format and purego (for libturbojpeg)
// only.
package vision
