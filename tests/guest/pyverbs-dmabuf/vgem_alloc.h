/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Buffers from vgem for dmabuf.pyx: a dumb buffer on vgem's primary node,
 * exported as a read-write dma-buf. The ioctl numbers and structures are
 * the kernel's UAPI (include/uapi/drm), restated so that no DRM headers
 * need installing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct vgem_create_dumb {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};
struct vgem_map_dumb {
	uint32_t handle, pad;
	uint64_t offset;
};
struct vgem_prime_handle {
	uint32_t handle, flags;
	int32_t fd;
};
struct vgem_gem_close {
	uint32_t handle, pad;
};
#define VGEM_IOCTL_GEM_CLOSE _IOW('d', 0x09, struct vgem_gem_close)
#define VGEM_IOCTL_PRIME_HANDLE_TO_FD _IOWR('d', 0x2d, struct vgem_prime_handle)
#define VGEM_IOCTL_MODE_CREATE_DUMB _IOWR('d', 0xB2, struct vgem_create_dumb)
#define VGEM_IOCTL_MODE_MAP_DUMB _IOWR('d', 0xB3, struct vgem_map_dumb)
#define VGEM_ROW 4096u

/*
 * The primary node of the DRM device whose render node is
 * /dev/dri/renderD<128+gpu>, opened; or -errno: ENOENT without that render
 * node, EOPNOTSUPP if its driver is not vgem.
 */
static int vgem_open_primary(int gpu)
{
	char path[PATH_MAX], link[PATH_MAX];
	struct dirent *d;
	ssize_t n;
	DIR *dp;
	int fd = -ENOENT;

	snprintf(path, sizeof(path), "/dev/dri/renderD%d", 128 + gpu);
	if (access(path, F_OK))
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/class/drm/renderD%d/device", 128 + gpu);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -errno;
	link[n] = 0;
	if (strcmp(strrchr(link, '/') ? strrchr(link, '/') : link, "/vgem"))
		return -EOPNOTSUPP;
	snprintf(path, sizeof(path), "/sys/class/drm/renderD%d/device/drm", 128 + gpu);
	dp = opendir(path);
	if (!dp)
		return -errno;
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, "card", 4))
			continue;
		snprintf(path, sizeof(path), "/dev/dri/%s", d->d_name);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
		break;
	}
	closedir(dp);
	return fd;
}

/* 0, or a positive errno. */
static int vgem_alloc(unsigned long size, int gpu, int *drm_fd, int *handle, int *fd,
		      unsigned long *map_offset, unsigned long *got)
{
	struct vgem_create_dumb c = { .width = VGEM_ROW, .bpp = 8 };
	struct vgem_prime_handle p = { .flags = O_RDWR | O_CLOEXEC };
	struct vgem_map_dumb m = { 0 };
	struct vgem_gem_close g = { 0 };
	int dev, err;

	if (!size || size > (unsigned long)UINT32_MAX * VGEM_ROW)
		return EINVAL;
	dev = vgem_open_primary(gpu);
	if (dev < 0)
		return -dev;
	c.height = (size + VGEM_ROW - 1) / VGEM_ROW;
	if (ioctl(dev, VGEM_IOCTL_MODE_CREATE_DUMB, &c))
		goto fail;
	p.handle = m.handle = g.handle = c.handle;
	if (ioctl(dev, VGEM_IOCTL_PRIME_HANDLE_TO_FD, &p))
		goto fail_handle;
	if (ioctl(dev, VGEM_IOCTL_MODE_MAP_DUMB, &m)) {
		err = errno;
		close(p.fd);
		errno = err;
		goto fail_handle;
	}
	*drm_fd = dev;
	*handle = c.handle;
	*fd = p.fd;
	*map_offset = m.offset;
	*got = c.size;
	return 0;

fail_handle:
	err = errno;
	ioctl(dev, VGEM_IOCTL_GEM_CLOSE, &g);
	errno = err;
fail:
	err = errno;
	close(dev);
	return err;
}

static void vgem_free(int drm_fd, int handle, int fd)
{
	struct vgem_gem_close g = { .handle = handle };

	close(fd);
	ioctl(drm_fd, VGEM_IOCTL_GEM_CLOSE, &g);
	close(drm_fd);
}
