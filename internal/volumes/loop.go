package volumes

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// loopMajor is the block major number of loop devices.
const loopMajor = 7

// mountImage loop-mounts the ext4 image file at dir. The loop device is
// set to clear itself when the mount goes (LO_FLAGS_AUTOCLEAR), so an
// unmount is all a removal needs and a crash leaves only the mount.
func mountImage(image, dir string) error {
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open volume image: %w", err)
	}
	defer img.Close()
	// Another process (another daemon, losetup) may take the free device
	// between LOOP_CTL_GET_FREE and LOOP_SET_FD: try the next one.
	for attempt := 0; attempt < 20; attempt++ {
		dev, err := freeLoop()
		if err != nil {
			return err
		}
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", dev, err)
		}
		err = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_SET_FD, int(img.Fd()))
		if errors.Is(err, unix.EBUSY) {
			lf.Close()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			lf.Close()
			return fmt.Errorf("attach %s: %w", dev, err)
		}
		err = unix.IoctlLoopSetStatus64(int(lf.Fd()), &unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR})
		if err == nil {
			err = unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "")
		}
		if err != nil {
			unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
			lf.Close()
			return fmt.Errorf("mount %s on %s: %w", dev, dir, err)
		}
		// Closing our fd leaves the device held by the mount alone.
		lf.Close()
		return nil
	}
	return fmt.Errorf("no free loop device after retries")
}

// freeLoop asks the kernel for a free loop device, making its node when
// /dev (a container's) lacks it.
func freeLoop() (string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("open /dev/loop-control: %w", err)
	}
	defer ctl.Close()
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
	}
	dev := fmt.Sprintf("/dev/loop%d", n)
	if _, err := os.Stat(dev); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(loopMajor, uint32(n)))); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("mknod %s: %w", dev, err)
		}
	}
	return dev, nil
}

// isMountPoint reports whether dir is mounted on (its device differs from
// its parent's).
func isMountPoint(dir string) bool {
	var st, pst unix.Stat_t
	if unix.Stat(dir, &st) != nil || unix.Stat(dir+"/..", &pst) != nil {
		return false
	}
	return st.Dev != pst.Dev
}

// unmount unmounts dir (its loop device clears itself).
func unmount(dir string) error { return unix.Unmount(dir, 0) }
