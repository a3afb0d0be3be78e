/*
 * internal.h: helpers shared by the files of the topo module and nothing
 * else: the PCI-id tables discovery and XML loading classify devices with,
 * the device presets the built-in models use, and the hwloc -> node
 * conversion both the XML loader and discovery end in.
 *
 * Never include this outside src/topo/.
 */
#ifndef IOD_TOPO_INTERNAL_H
#define IOD_TOPO_INTERNAL_H

#include "iod/topo.h"

#include <hwloc.h>

/* PCI vendor ids we recognise. */
#define IOD_PCI_VENDOR_NVIDIA 0x10de
#define IOD_PCI_VENDOR_MELLANOX 0x15b3
#define IOD_PCI_VENDOR_AMD_ATI 0x1002
#define IOD_PCI_VENDOR_XILINX 0x10ee
#define IOD_PCI_VENDOR_ALTERA 0x1172
#define IOD_PCI_VENDOR_INTEL 0x8086

/* Bytes per second of one PCIe lane per direction, by generation (after
 * line encoding): gen1/2 8b/10b, gen3+ 128b/130b. */
uint64_t iod_topo_pcie_lane_Bps(unsigned gen);
/* Fill pcie_gen/width/bps together. */
void iod_topo_device_set_pcie(struct iod_topo_device *d, unsigned gen, unsigned width);

/*
 * Number the PCI tree of a modelled node depth-first: each host bridge
 * takes the next bus for its root ports; each child (devices first, then
 * switches, in index order) the next bus; a switch's upstream port sits on
 * that bus and its downstream ports on the following one. Devices get
 * dom:bus:00.0. The XML writer relies on exactly this numbering.
 */
void iod_topo_assign_pci(struct iod_topo_node *n);

/* Classify a PCI function by vendor/device/class: GPU, NIC, DPU, FPGA,
 * NVMe or OTHER (not modelled). */
enum iod_topo_dev_kind iod_topo_pci_classify(uint16_t vendor, uint16_t device, uint32_t class_id);
/* A vendor name for a PCI vendor id ("NVIDIA", "Mellanox"), or NULL. */
const char *iod_topo_pci_vendor_name(uint16_t vendor);

/* Convert a loaded hwloc topology into *n (then finalize). `what` names
 * the source in error messages ("file.xml", "this machine"). */
int iod_topo_from_hwloc(hwloc_topology_t t, struct iod_topo_node *n, const char *what,
                        struct iod_err *e);

/* Load XML iod wrote itself in this process (no fork): the writer's check. */
int iod_topo_load_xml_trusted(const char *buf, size_t len, struct iod_topo_node *n,
                              struct iod_err *e);

/* NVML (dlopen'ed): enrich GPUs of a discovered node with UUID, memory and
 * NVLinks. Returns 0 also when NVML is absent (nothing done), or -errno. */
int iod_topo_nvml_enrich(struct iod_topo_node *n, struct iod_err *e);

/* Safe string copy into a fixed field. */
static inline void iod_topo_copy(char *dst, size_t len, const char *src)
{
	iod_strlcpy(dst, src ? src : "", len);
}
#define IOD_TOPO_COPY(dst, src) iod_topo_copy((dst), sizeof(dst), (src))

#endif
