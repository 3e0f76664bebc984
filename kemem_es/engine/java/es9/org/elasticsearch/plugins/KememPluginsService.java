/*
 * kemem-es: the plugins of the local Elasticsearch development node.
 *
 * Elastic publishes the server jar and the transport-netty4 module to Maven Central, but no
 * distribution layout (modules/, plugins/). This service reports exactly the plugin classes it
 * is given, loaded from the classpath, and nothing else. It lives in this package because the
 * record of a loaded plugin and the plugin factory are package-private (internal API: pinned
 * to one Elasticsearch release per major, see the pom). 9.x: the descriptor has a deployment target.
 */
package org.elasticsearch.plugins;

import org.elasticsearch.Version;
import org.elasticsearch.common.settings.Settings;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

public class KememPluginsService extends PluginsService {
    private final List<LoadedPlugin> classpathPlugins;

    public KememPluginsService(
        Settings settings, Path configDir, PluginsLoader loader, List<Class<? extends Plugin>> classes
    ) {
        super(settings, configDir, loader);
        List<LoadedPlugin> loaded = new ArrayList<>();
        for (Class<? extends Plugin> cls : classes) {
            Plugin instance = loadPlugin(cls, settings, configDir);
            PluginDescriptor descriptor = new PluginDescriptor(
                cls.getSimpleName(), "loaded from the classpath by kemem-es", Version.CURRENT.toString(),
                Version.CURRENT.toString(), Runtime.version().feature() + "", cls.getName(), null,
                List.of(), false, false, false, false,
                PluginDescriptor.DeploymentTarget.ALL
            );
            loaded.add(new LoadedPlugin(descriptor, instance, cls.getClassLoader()));
        }
        loadExtensions(loaded);
        this.classpathPlugins = List.copyOf(loaded);
    }

    @Override
    protected List<LoadedPlugin> plugins() {
        return classpathPlugins == null ? List.of() : classpathPlugins;
    }
}
